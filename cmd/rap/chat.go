package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-isatty"

	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/config"
	"github.com/gorap/gorap/runtime/store"
)

// Limits of the runtime API client.
const (
	maxAPIBody    = 16 << 20 // one JSON answer of the client API (a long history)
	maxSSELine    = 4 << 20  // one line of the event stream
	maxErrorQuote = 512      // how much of an error answer is quoted

	// apiRequestTimeout bounds one request of the client API (not the
	// event stream, which stays open).
	apiRequestTimeout = time.Minute
)

// apiClient talks to a runtime's client API (/v1, see docs/api.md).
type apiClient struct {
	base  string // such as http://127.0.0.1:8080, without a trailing slash
	token string // bearer token, or ""
	hc    *http.Client
}

func newAPIClient(base, token string) (*apiClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want an absolute http:// URL such as http://127.0.0.1:8080", base)
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{}}, nil
}

func (c *apiClient) do(ctx context.Context, method, path string, body any, out any) error {
	ctx, cancel := context.WithTimeout(ctx, apiRequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	c.auth(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is 'rap serve' running there?)", method, c.base+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if len(data) > maxAPIBody {
		return fmt.Errorf("%s %s: answer larger than %d bytes", method, path, maxAPIBody)
	}
	if resp.StatusCode/100 != 2 {
		return apiStatusError(method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: answer is not the expected JSON: %v", method, path, err)
		}
	}
	return nil
}

func (c *apiClient) auth(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// apiStatusError turns a non-2xx answer into an error quoting the server's
// message.
func apiStatusError(method, path string, status int, body []byte) error {
	msg := strings.TrimSpace(string(body))
	var e struct {
		Error any `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil {
		switch v := e.Error.(type) {
		case string:
			msg = v
		case map[string]any:
			if m, ok := v["message"].(string); ok {
				msg = m
			}
		}
	}
	if len(msg) > maxErrorQuote {
		msg = msg[:maxErrorQuote] + "…"
	}
	hint := ""
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = " (set RAP_TOKEN or --token to the server's token)"
	case http.StatusNotFound:
		hint = " (check the thread id with 'GET /v1/threads')"
	}
	return fmt.Errorf("%s %s: %s: %s%s", method, path, http.StatusText(status), msg, hint)
}

// createThread starts a new thread (a session) and returns its id.
func (c *apiClient) createThread(ctx context.Context) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/threads", struct{}{}, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("POST /v1/threads: the answer has no thread id")
	}
	return out.ID, nil
}

// postMessage adds a user message; it returns once the runtime accepted it
// durably.
func (c *apiClient) postMessage(ctx context.Context, threadID, text string) error {
	return c.do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(threadID)+"/messages", map[string]string{"text": text}, nil)
}

// history returns the thread's messages in order.
func (c *apiClient) history(ctx context.Context, threadID string) ([]store.Message, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(threadID)+"/messages", nil, &raw); err != nil {
		return nil, err
	}
	return decodeHistory(raw)
}

// decodeHistory accepts a bare array of messages or an object with a
// "messages" array.
func decodeHistory(raw json.RawMessage) ([]store.Message, error) {
	var msgs []store.Message
	if err := json.Unmarshal(raw, &msgs); err == nil {
		return msgs, nil
	}
	var wrapped struct {
		Messages []store.Message `json:"messages"`
	}
	if err := json.Unmarshal(raw, &wrapped); err != nil {
		return nil, fmt.Errorf("history: unexpected JSON: %v", err)
	}
	return wrapped.Messages, nil
}

// sseEvent is one server-sent event of a thread's stream.
type sseEvent struct {
	Type string
	Data json.RawMessage
}

// events opens the thread's event stream. The returned channel is closed
// when the stream ends or ctx is done; the error function then reports why.
func (c *apiClient) events(ctx context.Context, threadID string) (<-chan sseEvent, func() error, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/threads/"+url.PathEscape(threadID)+"/events", nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.auth(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s/v1/threads/%s/events: %w (is 'rap serve' running there?)", c.base, threadID, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorQuote))
		resp.Body.Close()
		return nil, nil, apiStatusError("GET", "/v1/threads/"+threadID+"/events", resp.StatusCode, body)
	}
	ch := make(chan sseEvent, 64)
	var streamErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		defer resp.Body.Close()
		streamErr = readSSE(resp.Body, func(ev sseEvent) bool {
			select {
			case ch <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	errf := func() error {
		<-done
		if ctx.Err() != nil {
			return nil
		}
		return streamErr
	}
	return ch, errf, nil
}

// readSSE parses a text/event-stream and calls emit for each event until
// emit returns false or the stream ends. An event without an "event:" field
// whose data is an object with "type" and "data" members is unwrapped.
func readSSE(r io.Reader, emit func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxSSELine)
	var typ string
	var data []string
	flush := func() bool {
		defer func() { typ, data = "", nil }()
		if len(data) == 0 {
			return true
		}
		ev := sseEvent{Type: typ, Data: json.RawMessage(strings.Join(data, "\n"))}
		if ev.Type == "" || ev.Type == "message" && looksWrapped(ev.Data) {
			var w struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			if json.Unmarshal(ev.Data, &w) == nil && w.Type != "" {
				ev.Type, ev.Data = w.Type, w.Data
			}
		}
		return emit(ev)
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if !flush() {
				return nil
			}
		case strings.HasPrefix(line, ":"):
			// comment / keep-alive
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				typ = value
			case "data":
				data = append(data, value)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	flush()
	return io.ErrUnexpectedEOF
}

// looksWrapped reports whether data is an object with both "type" and
// "data" members (an Event marshalled whole).
func looksWrapped(data json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	_, t := m["type"]
	_, d := m["data"]
	return t && d
}

// transcript renders a thread's events and history for people: streamed
// assistant text, tool calls with their display text, tool results (the
// display_as text segment when there is one, else the text, shortened) and
// errors. It is shared by "rap chat" and "rap demo".
type transcript struct {
	w io.Writer
	// echoUser prints user messages as they are added to the history.
	echoUser bool
	// stream prints assistant text as it streams (text_delta events);
	// otherwise assistant text is printed when the turn is saved, so the
	// transcript follows the history's order exactly.
	stream bool
	// showStatus prints running/idle changes.
	showStatus bool
	// maxResultLines and maxResultChars shorten tool results.
	maxResultLines, maxResultChars int

	midLine  bool            // streamed text ended without a newline
	streamed bool            // text deltas arrived since the last assistant message
	calls    map[string]bool // call ids already printed
	results  map[string]bool // result call ids already printed
}

func newTranscript(w io.Writer) *transcript {
	return &transcript{w: w, maxResultLines: 8, maxResultChars: 600, calls: map[string]bool{}, results: map[string]bool{}}
}

func (t *transcript) endLine() {
	if t.midLine {
		fmt.Fprintln(t.w)
		t.midLine = false
	}
}

// event renders one event of the thread's stream.
func (t *transcript) event(ev sseEvent) {
	switch ev.Type {
	case "text_delta":
		if !t.stream {
			return
		}
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Text == "" {
			return
		}
		if !t.midLine {
			fmt.Fprint(t.w, "assistant: ")
		}
		fmt.Fprint(t.w, d.Text)
		t.midLine = !strings.HasSuffix(d.Text, "\n")
		t.streamed = true
	case "message":
		var m store.Message
		if json.Unmarshal(ev.Data, &m) != nil {
			return
		}
		switch m.Role {
		case store.RoleUser:
			if t.echoUser && m.Text != "" {
				t.endLine()
				fmt.Fprintf(t.w, "you: %s\n", m.Text)
			}
		case store.RoleAssistant:
			if m.Text != "" {
				if !t.streamed {
					t.endLine()
					fmt.Fprintf(t.w, "assistant: %s\n", strings.TrimRight(m.Text, "\n"))
				}
				t.streamed = false
			}
			t.endLine()
			for _, c := range m.ToolCalls {
				t.toolCall(c.ID, c.Name, c.Arguments, c.Display)
			}
		}
		for _, r := range m.ToolResults {
			t.toolResult(r)
		}
	case "tool_call":
		var c struct {
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Display   string          `json:"display"`
		}
		if json.Unmarshal(ev.Data, &c) == nil {
			t.toolCall(c.CallID, c.Name, c.Arguments, c.Display)
		}
	case "tool_result":
		var r store.ToolResult
		if json.Unmarshal(ev.Data, &r) == nil {
			t.toolResult(r)
		}
	case "error":
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev.Data, &e)
		if e.Message == "" {
			e.Message = string(ev.Data)
		}
		t.endLine()
		fmt.Fprintf(t.w, "  ! error: %s\n", e.Message)
	case "toolsets":
		var s struct {
			Loaded []string `json:"loaded"`
			Errors []any    `json:"errors"`
		}
		if json.Unmarshal(ev.Data, &s) != nil {
			return
		}
		t.endLine()
		fmt.Fprintf(t.w, "  · toolsets loaded: %s\n", orNone(strings.Join(s.Loaded, ", ")))
		for _, e := range s.Errors {
			fmt.Fprintf(t.w, "  ! toolset error: %s\n", oneLine(fmt.Sprint(e), 300))
		}
	case "view":
		var v struct {
			ViewType string          `json:"view_type"`
			Content  json.RawMessage `json:"content"`
		}
		if json.Unmarshal(ev.Data, &v) == nil {
			t.endLine()
			fmt.Fprintf(t.w, "  · view %s: %s\n", v.ViewType, oneLine(string(v.Content), 200))
		}
	case "thread_spawned":
		var e struct {
			ThreadID   string `json:"thread_id"`
			OriginTool string `json:"origin_tool"`
			Reason     string `json:"reason"`
		}
		if json.Unmarshal(ev.Data, &e) == nil {
			t.endLine()
			why := strings.ReplaceAll(e.Reason, "_", " ")
			if e.OriginTool != "" {
				why += " of " + e.OriginTool
			}
			fmt.Fprintf(t.w, "  · child thread %s started (%s)\n", shortID(e.ThreadID), why)
		}
	case "thread_closed":
		var e struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &e) == nil {
			t.endLine()
			fmt.Fprintf(t.w, "  · thread %s closed\n", shortID(e.ThreadID))
		}
	case "status":
		if t.showStatus {
			var s struct {
				State string `json:"state"`
			}
			if json.Unmarshal(ev.Data, &s) == nil {
				t.endLine()
				fmt.Fprintf(t.w, "  · %s\n", s.State)
			}
		}
	}
}

func (t *transcript) toolCall(id, name string, args json.RawMessage, display string) {
	if id != "" {
		if t.calls[id] {
			return
		}
		t.calls[id] = true
	}
	t.endLine()
	if display == "" {
		display = name + "(" + oneLine(string(args), 200) + ")"
	}
	fmt.Fprintf(t.w, "  → %s\n", oneLine(display, 300))
}

func (t *transcript) toolResult(r store.ToolResult) {
	if r.CallID != "" {
		if t.results[r.CallID] {
			return
		}
		t.results[r.CallID] = true
	}
	t.endLine()
	text := resultText(r)
	label := r.Name
	switch label {
	case "":
		label = "result"
	case runtime.InjectedToolName:
		label = "event"
	}
	if r.IsError {
		label += " (error)"
	}
	if r.Subscription {
		label += " (subscription)"
	}
	lines := strings.Split(t.shorten(text), "\n")
	fmt.Fprintf(t.w, "  ← %s: %s\n", label, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(t.w, "      %s\n", l)
	}
}

// resultText is what people see of a result: the first display_as text
// segment (RAP RE-3), else the text items of content, else text.
func resultText(r store.ToolResult) string {
	for _, seg := range r.DisplayAs {
		if seg.Type == "text" {
			var s string
			if json.Unmarshal(seg.Content, &s) == nil {
				return s
			}
		}
	}
	if len(r.Content) > 0 {
		var parts []string
		for _, c := range r.Content {
			switch c.Type {
			case "text":
				parts = append(parts, c.Text)
			case "image":
				parts = append(parts, "[image "+c.MediaType+"]")
			}
		}
		return strings.Join(parts, "\n")
	}
	return r.Text
}

// shorten keeps at most maxResultLines lines and maxResultChars bytes.
func (t *transcript) shorten(s string) string {
	s = strings.TrimRight(s, "\n")
	cut := false
	if lines := strings.Split(s, "\n"); len(lines) > t.maxResultLines {
		s = strings.Join(lines[:t.maxResultLines], "\n")
		cut = true
	}
	if len(s) > t.maxResultChars {
		s = truncUTF8(s, t.maxResultChars)
		cut = true
	}
	if cut {
		s += " … (shortened)"
	}
	return s
}

// history renders stored messages, as when a thread is resumed.
func (t *transcript) history(msgs []store.Message) {
	for _, m := range msgs {
		switch m.Role {
		case store.RoleUser:
			if m.Text != "" {
				fmt.Fprintf(t.w, "you: %s\n", m.Text)
			}
		case store.RoleAssistant:
			if m.Text != "" {
				fmt.Fprintf(t.w, "assistant: %s\n", strings.TrimRight(m.Text, "\n"))
			}
			for _, c := range m.ToolCalls {
				t.toolCall(c.ID, c.Name, c.Arguments, c.Display)
			}
		}
		for _, r := range m.ToolResults {
			t.toolResult(r)
		}
	}
}

// shortID shortens a thread id for display.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// oneLine collapses whitespace runs and shortens s to max bytes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return truncUTF8(s, max) + "…"
	}
	return s
}

// truncUTF8 cuts s to at most n bytes without splitting a character.
func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// pendingCalls returns the ids of tool calls in msgs that have no result yet.
func pendingCalls(msgs []store.Message) map[string]string {
	pending := map[string]string{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			pending[c.ID] = c.Name
		}
	}
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			delete(pending, r.CallID)
		}
	}
	return pending
}

func init() {
	register(&command{
		name:    "chat",
		summary: "talk to a running runtime ('rap serve') in the terminal",
		usage:   "rap chat [--server URL] [--thread ID] [--wait D]",
		run:     runChat,
	})
}

// chatOptions are the flags of "rap chat".
type chatOptions struct {
	server string
	token  string
	thread string
	wait   time.Duration
	status bool
}

func runChat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commands["chat"]
	fs := newFlagSet(c, stderr)
	opts := chatOptions{server: os.Getenv("RAP_SERVER"), token: os.Getenv(config.EnvToken)}
	if opts.server == "" {
		opts.server = "http://" + config.DefaultListen
	}
	fs.StringVar(&opts.server, "server", opts.server, "runtime `URL` (env RAP_SERVER)")
	fs.StringVar(&opts.thread, "thread", "", "resume thread `ID` (its history is printed first); default: a new thread")
	fs.DurationVar(&opts.wait, "wait", 2*time.Minute, "how long to wait, after each message and at the end of input, for the thread to go idle and its tool calls to finish")
	fs.BoolVar(&opts.status, "status", false, "show running/idle changes")
	fs.Var((*secretFlag)(&opts.token), "token", "bearer `TOKEN` of the client API (env "+config.EnvToken+")")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	return chat(ctx, opts, os.Stdin, stdinIsTerminal(), stdout, stderr)
}

// secretFlag is a string flag whose value is never printed in help output.
type secretFlag string

func (v *secretFlag) String() string     { return "" }
func (v *secretFlag) Set(s string) error { *v = secretFlag(s); return nil }

// stdinIsTerminal reports whether stdin is a terminal (not a file, a pipe
// or /dev/null, which is a character device too).
func stdinIsTerminal() bool {
	fd := os.Stdin.Fd()
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}

// threadWatch follows a thread's event stream: it prints every event and
// tracks whether the thread is running.
type threadWatch struct {
	mu      sync.Mutex
	state   string // last status: "running", "idle" or "" (unknown)
	idles   int    // idle events seen
	errors  int    // error events seen
	changed chan struct{}
}

func (w *threadWatch) note(ev sseEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Type {
	case "status":
		var s struct {
			State string `json:"state"`
		}
		if json.Unmarshal(ev.Data, &s) == nil {
			w.state = s.State
			if s.State == "idle" {
				w.idles++
			}
		}
	case "error":
		w.errors++
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *threadWatch) snapshot() (state string, idles, errs int, changed <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state, w.idles, w.errors, w.changed
}

// chat runs the chat loop: it reads lines from in, posts each as a user
// message, and prints the thread's events to stdout as they arrive. After
// each message it waits (up to opts.wait) for the thread to go idle; at the
// end of input it also waits for pending tool calls, then returns.
func chat(ctx context.Context, opts chatOptions, in io.Reader, interactive bool, stdout, stderr io.Writer) error {
	api, err := newAPIClient(opts.server, opts.token)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	threadID := opts.thread
	tr := newTranscript(stdout)
	tr.echoUser = !interactive
	tr.stream = interactive
	tr.showStatus = opts.status
	var printMu sync.Mutex // the transcript is written by the event reader and by this loop
	if threadID == "" {
		if threadID, err = api.createThread(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "thread %s (resume with: rap chat --thread %s)\n", threadID, threadID)
	}
	var earlier []store.Message
	if opts.thread != "" {
		if earlier, err = api.history(ctx, threadID); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "thread %s: %d earlier messages\n", threadID, len(earlier))
	}

	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	events, streamErr, err := api.events(streamCtx, threadID)
	if err != nil {
		return err
	}
	watch := &threadWatch{changed: make(chan struct{})}
	readerDone := make(chan struct{})
	first := make(chan struct{})
	go func() {
		defer close(readerDone)
		var once sync.Once
		defer once.Do(func() { close(first) })
		for ev := range events {
			printMu.Lock()
			tr.event(ev)
			printMu.Unlock()
			watch.note(ev)
			once.Do(func() { close(first) })
		}
	}()
	// The stream starts with the session's toolsets: show them before the
	// first prompt.
	select {
	case <-first:
	case <-time.After(2 * time.Second):
	}
	if opts.thread != "" {
		printMu.Lock()
		tr.history(earlier)
		if p := pendingCalls(earlier); len(p) > 0 {
			fmt.Fprintf(stdout, "  · %d tool call(s) still waiting for results\n", len(p))
		}
		printMu.Unlock()
	}

	lines := make(chan inputLine)
	readErr := make(chan error, 1)
	go func() {
		readErr <- readLines(in, MaxChatLine, func(l inputLine) bool {
			select {
			case lines <- l:
				return true
			case <-ctx.Done():
				return false
			}
		})
		close(lines)
	}()

	prompt := func() {
		if interactive {
			printMu.Lock()
			tr.endLine()
			fmt.Fprint(stdout, "you> ")
			printMu.Unlock()
		}
	}
	prompt()
	_, _, errsAtLastPost, _ := watch.snapshot()
	for {
		var line inputLine
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ctx.Done():
			return nil
		case <-readerDone:
			return fmt.Errorf("event stream of thread %s ended: %v (the server may have stopped; resume with --thread %s)", threadID, streamErr(), threadID)
		}
		if !ok {
			if err := <-readErr; err != nil {
				return fmt.Errorf("reading input: %w", err)
			}
			break
		}
		if line.tooLong {
			printMu.Lock()
			fmt.Fprintf(stderr, "rap chat: line %d not sent: it is longer than %d bytes\n", line.n, MaxChatLine)
			printMu.Unlock()
			prompt()
			continue
		}
		text := strings.TrimSpace(line.text)
		if text == "" {
			prompt()
			continue
		}
		if text == "/quit" || text == "/exit" {
			return nil
		}
		_, idlesBefore, errsBefore, _ := watch.snapshot()
		errsAtLastPost = errsBefore
		countBefore, err := countUserText(ctx, api, threadID, text)
		if err != nil {
			return err
		}
		if err := api.postMessage(ctx, threadID, text); err != nil {
			// Nothing was accepted: say so and go on with the next line.
			printMu.Lock()
			fmt.Fprintf(stderr, "rap chat: message not sent: %v\n", err)
			printMu.Unlock()
			prompt()
			continue
		}
		if err := waitSettled(ctx, api, watch, threadID, text, countBefore, idlesBefore, errsBefore, false, opts.wait); err != nil {
			printMu.Lock()
			tr.endLine()
			fmt.Fprintf(stderr, "rap chat: %v\n", err)
			printMu.Unlock()
		}
		prompt()
	}
	// End of input: wait for the thread to finish, pending calls included.
	_, idles, _, _ := watch.snapshot()
	if err := waitSettled(ctx, api, watch, threadID, "", 0, idles-1, errsAtLastPost, true, opts.wait); err != nil {
		printMu.Lock()
		tr.endLine()
		printMu.Unlock()
		return err
	}
	printMu.Lock()
	tr.endLine()
	if _, _, errs, _ := watch.snapshot(); errs > errsAtLastPost {
		fmt.Fprintf(stderr, "rap chat: the runtime reported an error; the unanswered message stays queued and is retried with the next message (resume with --thread %s)\n", threadID)
	}
	printMu.Unlock()
	return nil
}

// MaxChatLine bounds one line of chat input. The runtime has its own,
// smaller limit on a message (runtime.MaxMessageBytes).
const MaxChatLine = 1 << 20

// inputLine is one line of chat input.
type inputLine struct {
	text    string
	n       int  // line number, from 1
	tooLong bool // the line was longer than the limit and was dropped
}

// readLines reads lines from r and passes them to emit until the input
// ends (nil), reading fails, or emit returns false. A line longer than max
// bytes is dropped and reported with tooLong, and reading goes on.
func readLines(r io.Reader, max int, emit func(inputLine) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		var buf []byte
		tooLong := false
		for {
			frag, isPrefix, err := br.ReadLine()
			if err == io.EOF {
				if len(buf) == 0 && !tooLong {
					return nil
				}
				break
			}
			if err != nil {
				return err
			}
			if !tooLong {
				if len(buf)+len(frag) > max {
					tooLong, buf = true, nil
				} else {
					buf = append(buf, frag...)
				}
			}
			if !isPrefix {
				break
			}
		}
		n++
		if !emit(inputLine{text: string(buf), n: n, tooLong: tooLong}) {
			return nil
		}
	}
}

// countUserText counts the user messages of the history whose text is text.
func countUserText(ctx context.Context, api *apiClient, threadID, text string) (int, error) {
	msgs, err := api.history(ctx, threadID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range msgs {
		if m.Role == store.RoleUser && m.Text == text {
			n++
		}
	}
	return n, nil
}

// threadStatus is the part of GET /v1/threads/{id} that chat uses.
type threadStatus struct {
	Queued       int `json:"queued"`
	PendingCalls []struct {
		CallID   string `json:"call_id"`
		ToolName string `json:"tool_name"`
	} `json:"pending_calls"`
}

// status reads the thread's queue length and pending calls.
func (c *apiClient) status(ctx context.Context, threadID string) (*threadStatus, error) {
	var st threadStatus
	if err := c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(threadID), nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// waitSettled waits until the thread is idle after the message text was
// posted: an idle event arrived after the post, nothing is queued, and an
// assistant message follows the user message in the history. An error
// event after the post also ends the wait (the message stays queued and is
// retried with the next one: RAP RT-4). With allCalls it also waits until
// no tool call of the thread lacks its result. text "" skips the message
// checks (used at the end of input).
func waitSettled(ctx context.Context, api *apiClient, w *threadWatch, threadID, text string, countBefore, idlesBefore, errsBefore int, allCalls bool, wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	var last *threadStatus
	for {
		state, idles, errs, changed := w.snapshot()
		if errs > errsBefore && state != "running" {
			return nil
		}
		ready := state == "idle" && idles > idlesBefore
		if text == "" {
			ready = state != "running"
		}
		if ready {
			st, err := api.status(ctx, threadID)
			if err != nil {
				return err
			}
			last = st
			if st.Queued == 0 && (!allCalls || len(st.PendingCalls) == 0) {
				if text == "" {
					return nil
				}
				msgs, err := api.history(ctx, threadID)
				if err != nil {
					return err
				}
				if settledIn(msgs, text, countBefore) {
					return nil
				}
			}
		}
		select {
		case <-changed:
		case <-poll.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if last != nil && len(last.PendingCalls) > 0 {
				names := make([]string, 0, len(last.PendingCalls))
				for _, c := range last.PendingCalls {
					names = append(names, c.ToolName)
				}
				sort.Strings(names)
				return fmt.Errorf("gave up waiting after %v: %d tool call(s) still pending (%s); their results will appear with 'rap chat --thread %s'", wait, len(names), strings.Join(names, ", "), threadID)
			}
			return fmt.Errorf("gave up waiting after %v for thread %s to go idle; raise --wait", wait, threadID)
		}
	}
}

// settledIn reports whether msgs show the message text processed: it
// appears more than countBefore times and an assistant message follows its
// last occurrence.
func settledIn(msgs []store.Message, text string, countBefore int) bool {
	n, last := 0, -1
	for i, m := range msgs {
		if m.Role == store.RoleUser && m.Text == text {
			n++
			last = i
		}
	}
	if n <= countBefore {
		return false
	}
	for _, m := range msgs[last+1:] {
		if m.Role == store.RoleAssistant {
			return true
		}
	}
	return false
}
