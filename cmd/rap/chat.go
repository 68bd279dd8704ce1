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
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-isatty"

	"github.com/gorap/gorap/rap"
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

// apiError is a non-2xx answer of the client API.
type apiError struct {
	Method, Path string
	Status       int
	Msg          string // the server's message, shortened
}

func (e *apiError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = " (set RAP_TOKEN or --token to the server's token)"
	case http.StatusNotFound:
		hint = " (check the thread id with 'rap chat --tree')"
	}
	return fmt.Sprintf("%s %s: %s: %s%s", e.Method, e.Path, http.StatusText(e.Status), e.Msg, hint)
}

// apiStatusError turns a non-2xx answer into an *apiError quoting the
// server's message.
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
		msg = truncUTF8(msg, maxErrorQuote) + "…"
	}
	return &apiError{Method: method, Path: path, Status: status, Msg: clean(msg)}
}

// statusOf returns the HTTP status of an *apiError in err's chain, or 0.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
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

// Limits of what the chat client shows.
const (
	maxShownChoices = 100     // choices of one user_choice listed
	maxPromptChars  = 2000    // of a user_choice prompt
	maxAuthURL      = 8 << 10 // of an oauth link
	maxDiffLines    = 40      // of a diff display segment
	maxChildInput   = 160     // of a child thread's input (the runtime's note, a parent's message)
	maxFollowed     = 256     // child threads one chat follows
	maxTreeLines    = 2000    // lines of the thread tree
	maxTreeDepth    = 64      // levels of the thread tree
	maxViewSummary  = 200     // of a view's one-line summary
	quietPoll       = 250 * time.Millisecond
	// primeGap and primeWait bound the wait for the events a stream sends
	// on connect (views, authorization links) when a thread is resumed.
	primeGap  = 150 * time.Millisecond
	primeWait = 1500 * time.Millisecond
	// childCatchUp bounds how long a parent's thread_closed event for a
	// child waits for the child's own stream to be printed.
	childCatchUp = 2 * time.Second
)

// lineState is shared by the transcripts that write to one output: the
// writer, if any, whose last line is unfinished (streamed text, a prompt).
type lineState struct{ open io.Writer }

// prefixWriter starts every line written through it with prefix: the
// output of a followed child thread.
type prefixWriter struct {
	w      io.Writer
	prefix string
	mid    bool // the last write did not end a line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if !p.mid {
			if _, err := io.WriteString(p.w, p.prefix); err != nil {
				return 0, err
			}
			p.mid = true
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if _, err := p.w.Write(b); err != nil {
				return 0, err
			}
			break
		}
		if _, err := p.w.Write(b[:i+1]); err != nil {
			return 0, err
		}
		b = b[i+1:]
		p.mid = false
	}
	return n, nil
}

// transcript renders a thread's events and history for people: streamed
// assistant text, tool calls with their display text, tool results (their
// display_as segment when there is one, else the text, shortened), errors,
// authorization links, user-choice pickers, views and child threads. It is
// shared by "rap chat" and "rap demo". Its methods are not safe for
// concurrent use: callers hold the lock of the output.
type transcript struct {
	w    io.Writer
	line *lineState
	// self is the thread shown; its messages are shown once each, by seq.
	self string
	// child marks a followed child thread: its inputs (the runtime's note,
	// a parent's message) are shown shortened as "»", and its toolsets and
	// its own closing are left to the parent's transcript.
	child bool
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

	streamed bool                   // text deltas arrived since the last assistant message
	calls    map[string]bool        // call ids already printed
	results  map[string]bool        // result call ids already printed
	seen     map[int64]bool         // seqs of self's messages already printed
	choices  map[string]shownChoice // user choices shown, by call id
	auth     map[string]string      // authorization links shown, by call id
}

// shownChoice is what a transcript remembers of a user choice to show its
// answer.
type shownChoice struct {
	tool    string
	choices []string
	def     int
}

func newTranscript(w io.Writer) *transcript {
	return &transcript{w: w, line: &lineState{}, maxResultLines: 8, maxResultChars: 600,
		calls: map[string]bool{}, results: map[string]bool{}, seen: map[int64]bool{},
		choices: map[string]shownChoice{}, auth: map[string]string{}}
}

// forChild returns the transcript of child thread id: it writes to the
// same output, each line prefixed with the child's short id.
func (t *transcript) forChild(id string) *transcript {
	c := newTranscript(&prefixWriter{w: t.w, prefix: "  [" + shortID(id) + "] "})
	c.line = t.line
	c.self, c.child, c.echoUser, c.showStatus = id, true, true, t.showStatus
	c.maxResultLines, c.maxResultChars = t.maxResultLines, t.maxResultChars
	return c
}

// endLine ends an unfinished line of the output.
func (t *transcript) endLine() {
	if t.line.open != nil {
		fmt.Fprintln(t.line.open)
		t.line.open = nil
	}
}

// printf starts a new line of the transcript.
func (t *transcript) printf(format string, args ...any) {
	t.endLine()
	fmt.Fprintf(t.w, format, args...)
}

// userText shows a user-role message: what the user said, or a child
// thread's input.
func (t *transcript) userText(text string) {
	if text == "" {
		return
	}
	if t.child {
		t.printf("» %s\n", oneLine(clean(text), maxChildInput))
		return
	}
	t.printf("you: %s\n", clean(text))
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
		if t.line.open != t.w {
			t.endLine()
			fmt.Fprint(t.w, "assistant: ")
		}
		fmt.Fprint(t.w, clean(d.Text))
		t.line.open = t.w
		if strings.HasSuffix(d.Text, "\n") {
			t.line.open = nil
		}
		t.streamed = true
	case "message":
		var m store.Message
		if json.Unmarshal(ev.Data, &m) != nil {
			return
		}
		t.message(m, t.echoUser)
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
		t.printf("  ! error: %s\n", oneLine(clean(e.Message), 1000))
	case "toolsets":
		if t.child {
			return // the session's, shown by the root
		}
		var s struct {
			Loaded []string `json:"loaded"`
			Errors []any    `json:"errors"`
		}
		if json.Unmarshal(ev.Data, &s) != nil {
			return
		}
		t.printf("  · toolsets loaded: %s\n", orNone(clean(strings.Join(s.Loaded, ", "))))
		for _, e := range s.Errors {
			fmt.Fprintf(t.w, "  ! toolset error: %s\n", oneLine(clean(fmt.Sprint(e)), 300))
		}
	case "view":
		var v struct {
			ViewType string          `json:"view_type"`
			Content  json.RawMessage `json:"content"`
		}
		if json.Unmarshal(ev.Data, &v) == nil {
			t.printf("  · view %s: %s\n", oneLine(clean(v.ViewType), 80), viewSummary(v.Content))
		}
	case "oauth":
		t.oauth(ev.Data)
	case "user_choice":
		t.userChoice(ev.Data)
	case "choice_answered":
		t.choiceAnswered(ev.Data)
	case "thread_spawned":
		var e struct {
			ThreadID   string `json:"thread_id"`
			OriginTool string `json:"origin_tool"`
			Reason     string `json:"reason"`
		}
		if json.Unmarshal(ev.Data, &e) == nil {
			why := strings.ReplaceAll(e.Reason, "_", " ")
			if e.OriginTool != "" && e.OriginTool != runtime.BuiltinSpawnThread {
				why += " of " + e.OriginTool
			}
			t.printf("  · child thread %s started (%s)\n", shortID(e.ThreadID), clean(why))
		}
	case "thread_closed":
		var e struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &e) == nil && !(t.child && e.ThreadID == t.self) {
			t.printf("  · thread %s closed\n", shortID(e.ThreadID))
		}
	case "status":
		if t.showStatus {
			var s struct {
				State string `json:"state"`
			}
			if json.Unmarshal(ev.Data, &s) == nil {
				t.printf("  · %s\n", clean(s.State))
			}
		}
	}
}

// message renders one history message. A message of this transcript's own
// thread is shown once, whether it comes from the history or the stream.
func (t *transcript) message(m store.Message, echoUser bool) {
	if t.self != "" && m.ThreadID == t.self && m.Seq > 0 {
		if t.seen[m.Seq] {
			return
		}
		t.seen[m.Seq] = true
	}
	switch m.Role {
	case store.RoleUser:
		if echoUser {
			t.userText(m.Text)
		}
	case store.RoleAssistant:
		if m.Text != "" {
			if !t.streamed {
				t.printf("assistant: %s\n", clean(strings.TrimRight(m.Text, "\n")))
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
}

func (t *transcript) toolCall(id, name string, args json.RawMessage, display string) {
	if id != "" {
		if t.calls[id] {
			return
		}
		t.calls[id] = true
	}
	if display == "" {
		display = name + "(" + oneLine(string(args), 200) + ")"
	}
	t.printf("  → %s\n", oneLine(clean(display), 300))
}

func (t *transcript) toolResult(r store.ToolResult) {
	if r.CallID != "" {
		if t.results[r.CallID] {
			return
		}
		t.results[r.CallID] = true
	}
	text, kind := resultText(r)
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
	maxLines, maxChars := t.maxResultLines, t.maxResultChars
	if kind == "diff" {
		// The patch is the point of a diff: it gets more room.
		maxLines, maxChars = max(maxLines, maxDiffLines), max(maxChars, maxDiffLines*100)
	}
	lines := strings.Split(shorten(clean(text), maxLines, maxChars), "\n")
	t.printf("  ← %s: %s\n", label, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(t.w, "      %s\n", l)
	}
}

// oauth shows a tool's authorization link (RAP OA-1), once per call and
// link. It is printed for the user and never logged.
func (t *transcript) oauth(data json.RawMessage) {
	var a struct {
		CallID  string `json:"call_id"`
		Name    string `json:"name"`
		AuthURL string `json:"auth_url"`
	}
	if json.Unmarshal(data, &a) != nil || a.AuthURL == "" {
		return
	}
	if t.auth[a.CallID] == a.AuthURL {
		return
	}
	t.auth[a.CallID] = a.AuthURL
	t.printf("  🔐 %s needs your authorization; its call waits until you grant it.\n", toolLabel(a.Name))
	fmt.Fprintf(t.w, "     Authorize at: %s\n", oneLine(clean(a.AuthURL), maxAuthURL))
}

// userChoice shows a tool's question as a numbered picker (RAP UC-1),
// once per call.
func (t *transcript) userChoice(data json.RawMessage) {
	c, ok := decodeChoice(data)
	if !ok {
		return
	}
	if _, shown := t.choices[c.callID]; shown {
		return
	}
	t.choices[c.callID] = shownChoice{tool: c.tool, choices: c.choices, def: c.def}
	prompt := shorten(clean(c.prompt), 20, maxPromptChars)
	lines := strings.Split(prompt, "\n")
	t.printf("  ? %s asks: %s\n", toolLabel(c.tool), lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(t.w, "      %s\n", l)
	}
	for i, ch := range c.choices {
		if i == maxShownChoices {
			fmt.Fprintf(t.w, "      … %d more choices not shown\n", len(c.choices)-i)
			break
		}
		def := ""
		if i == c.def {
			def = "  (default)"
		}
		fmt.Fprintf(t.w, "      %d) %s%s\n", i+1, oneLine(clean(ch), 200), def)
	}
	fmt.Fprintf(t.w, "    Answer with a number from 1 to %d; d or an empty line dismisses the question (the tool then gets %d).\n", len(c.choices), c.def+1)
}

// choiceAnswered shows the answer of a user choice, from this client or
// another one.
func (t *transcript) choiceAnswered(data json.RawMessage) {
	var a struct {
		CallID    string `json:"call_id"`
		Selected  int    `json:"selected"`
		Dismissed bool   `json:"dismissed"`
	}
	if json.Unmarshal(data, &a) != nil {
		return
	}
	c, known := t.choices[a.CallID]
	label := fmt.Sprintf("choice %d", a.Selected+1)
	if known && a.Selected >= 0 && a.Selected < len(c.choices) {
		label = fmt.Sprintf("%d) %s", a.Selected+1, oneLine(clean(c.choices[a.Selected]), 200))
	}
	who := "the question of call " + a.CallID
	if known {
		who = toolLabel(c.tool) + "'s question"
	}
	if a.Dismissed {
		t.printf("  · %s was dismissed; the tool gets its default, %s\n", who, label)
		return
	}
	t.printf("  · %s answered: %s\n", who, label)
}

// openChoice is a user choice waiting for its answer.
type openChoice struct {
	threadID, callID, tool, prompt string
	choices                        []string
	def                            int
}

// decodeChoice reads the data of a user_choice event.
func decodeChoice(data json.RawMessage) (openChoice, bool) {
	var c struct {
		CallID  string   `json:"call_id"`
		Name    string   `json:"name"`
		Prompt  string   `json:"prompt"`
		Choices []string `json:"choices"`
		Default int      `json:"default"`
	}
	if json.Unmarshal(data, &c) != nil || c.CallID == "" || len(c.Choices) == 0 || c.Default < 0 || c.Default >= len(c.Choices) {
		return openChoice{}, false
	}
	return openChoice{callID: c.CallID, tool: c.Name, prompt: c.Prompt, choices: c.Choices, def: c.Default}, true
}

func toolLabel(name string) string {
	if name == "" {
		return "a tool"
	}
	return oneLine(clean(name), 80)
}

// resultText is what people see of a result, and which kind it is: the
// first display_as segment of a supported type (RAP RE-3: text, diff,
// image; unknown types are skipped), else the items of content, else text.
func resultText(r store.ToolResult) (text, kind string) {
	for _, seg := range r.DisplayAs {
		if s, ok := segmentText(seg); ok {
			return s, seg.Type
		}
	}
	if len(r.Content) > 0 {
		var parts []string
		for _, c := range r.Content {
			switch c.Type {
			case "text":
				parts = append(parts, c.Text)
			case "image":
				parts = append(parts, "[image "+orUnknown(c.MediaType)+"]")
			}
		}
		return strings.Join(parts, "\n"), "content"
	}
	return r.Text, "text"
}

// segmentText renders one display segment, or reports that its type is
// not supported (or its content is not what the type requires).
func segmentText(seg rap.DisplaySegment) (string, bool) {
	switch seg.Type {
	case "text":
		var s string
		if json.Unmarshal(seg.Content, &s) == nil {
			return s, true
		}
	case "diff":
		var d struct {
			Path  string `json:"path"`
			Patch string `json:"patch"`
		}
		if json.Unmarshal(seg.Content, &d) == nil && d.Patch != "" {
			head := "diff"
			if d.Path != "" {
				head += " " + d.Path
			}
			return head + "\n" + strings.TrimRight(d.Patch, "\n"), true
		}
	case "image":
		var im struct {
			MediaType string `json:"mediaType"`
		}
		if json.Unmarshal(seg.Content, &im) == nil {
			return "[image " + orUnknown(im.MediaType) + "]", true
		}
	}
	return "", false
}

func orUnknown(mediaType string) string {
	if mediaType == "" {
		return "of unknown type"
	}
	return oneLine(clean(mediaType), 80)
}

// viewSummary is a one-line summary of a view's content (RAP VU-1: an
// object the runtime does not interpret): its members in key order,
// nested values abbreviated.
func viewSummary(content json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(content, &m) != nil {
		return oneLine(clean(string(content)), maxViewSummary)
	}
	if len(m) == 0 {
		return "(empty)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		var s string
		var arr []json.RawMessage
		var obj map[string]json.RawMessage
		switch {
		case json.Unmarshal(v, &s) == nil:
			s = strconv.Quote(oneLine(s, 60))
		case json.Unmarshal(v, &arr) == nil:
			s = fmt.Sprintf("[%d items]", len(arr))
		case json.Unmarshal(v, &obj) == nil:
			s = fmt.Sprintf("{%d members}", len(obj))
		default:
			s = string(v)
		}
		parts = append(parts, k+": "+s)
	}
	return oneLine(clean(strings.Join(parts, ", ")), maxViewSummary)
}

// clean makes text from tools, models and servers safe to print on a
// terminal: control characters other than newline and tab (escape
// sequences among them) become U+FFFD; carriage returns are dropped.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return -1
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return utf8.RuneError
		}
		return r
	}, s)
}

// shorten keeps at most maxLines lines and maxChars bytes of s.
func shorten(s string, maxLines, maxChars int) string {
	s = strings.TrimRight(s, "\n")
	cut := false
	if lines := strings.Split(s, "\n"); len(lines) > maxLines {
		s = strings.Join(lines[:maxLines], "\n")
		cut = true
	}
	if len(s) > maxChars {
		s = truncUTF8(s, maxChars)
		cut = true
	}
	if cut {
		s += " … (shortened)"
	}
	return s
}

// history renders stored messages, as when a thread is resumed or a child
// thread is first followed. Messages of other threads (a child's inherited
// history) are left out.
func (t *transcript) history(msgs []store.Message) {
	for _, m := range msgs {
		if t.self != "" && m.ThreadID != "" && m.ThreadID != t.self {
			continue
		}
		t.message(m, true)
	}
}

// shortID shortens a thread id for display.
func shortID(id string) string {
	id = clean(id)
	if len(id) > 8 {
		return truncUTF8(id, 8)
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

// userAsks tracks what the tools of the followed threads wait for from the
// user: open user choices (RAP UC-1), in the order they were asked, and
// authorizations (RAP OA-1). It is safe for concurrent use.
type userAsks struct {
	mu      sync.Mutex
	choices []openChoice
	auth    map[string]string // thread+"\x00"+call → tool name
	added   int               // asks seen so far
}

func askKey(threadID, callID string) string { return threadID + "\x00" + callID }

// note updates the asks from an event of thread threadID.
func (a *userAsks) note(threadID string, ev sseEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev.Type {
	case "user_choice":
		c, ok := decodeChoice(ev.Data)
		if !ok {
			return
		}
		for _, o := range a.choices {
			if o.threadID == threadID && o.callID == c.callID {
				return
			}
		}
		c.threadID = threadID
		a.choices = append(a.choices, c)
		a.added++
	case "oauth":
		var o struct {
			CallID string `json:"call_id"`
			Name   string `json:"name"`
		}
		if json.Unmarshal(ev.Data, &o) != nil || o.CallID == "" {
			return
		}
		if a.auth == nil {
			a.auth = map[string]string{}
		}
		if _, ok := a.auth[askKey(threadID, o.CallID)]; !ok {
			a.auth[askKey(threadID, o.CallID)] = o.Name
			a.added++
		}
	case "choice_answered":
		var c struct {
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil {
			a.dropLocked(threadID, c.CallID, false)
		}
	case "tool_result":
		var r struct {
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(ev.Data, &r) == nil {
			a.dropLocked(threadID, r.CallID, true)
		}
	case "message":
		var m store.Message
		if json.Unmarshal(ev.Data, &m) == nil {
			for _, r := range m.ToolResults {
				a.dropLocked(threadID, r.CallID, true)
			}
		}
	case "thread_closed":
		var c struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil && c.ThreadID == threadID {
			kept := a.choices[:0]
			for _, o := range a.choices {
				if o.threadID != threadID {
					kept = append(kept, o)
				}
			}
			a.choices = kept
			for k := range a.auth {
				if strings.HasPrefix(k, threadID+"\x00") {
					delete(a.auth, k)
				}
			}
		}
	}
}

// drop forgets the choice of a call (answered, or no longer open).
func (a *userAsks) drop(threadID, callID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropLocked(threadID, callID, false)
}

func (a *userAsks) dropLocked(threadID, callID string, auth bool) {
	for i, o := range a.choices {
		if o.threadID == threadID && o.callID == callID {
			a.choices = append(a.choices[:i:i], a.choices[i+1:]...)
			break
		}
	}
	if auth {
		delete(a.auth, askKey(threadID, callID))
	}
}

// next returns the oldest open choice.
func (a *userAsks) next() (openChoice, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.choices) == 0 {
		return openChoice{}, false
	}
	return a.choices[0], true
}

// count returns how many asks are open and how many were seen in all.
func (a *userAsks) count() (open, added int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.choices) + len(a.auth), a.added
}

// describe names the open asks, for the end of a chat.
func (a *userAsks) describe() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.choices {
		out = append(out, fmt.Sprintf("%s waits for your choice (thread %s)", toolLabel(c.tool), c.threadID))
	}
	keys := make([]string, 0, len(a.auth))
	for k := range a.auth {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		th, _, _ := strings.Cut(k, "\x00")
		out = append(out, fmt.Sprintf("%s waits for your authorization (thread %s)", toolLabel(a.auth[k]), th))
	}
	return out
}

// parseChoiceAnswer reads the user's answer to a choice of n options:
// a number from 1 to n, or "d" or an empty line to dismiss it. It returns
// the 0-based index, or nil for a dismissal.
func parseChoiceAnswer(text string, n int) (*int, error) {
	text = strings.TrimSpace(text)
	if text == "" || strings.EqualFold(text, "d") {
		return nil, nil
	}
	k, err := strconv.Atoi(text)
	if err != nil || k < 1 || k > n {
		return nil, fmt.Errorf("%q is not an answer: type a number from 1 to %d, or d (or an empty line) to dismiss the question", oneLine(text, 40), n)
	}
	k--
	return &k, nil
}

// answerChoice answers a user choice: selected, or a dismissal when nil
// (POST /v1/threads/{id}/choices/{call_id}).
func (c *apiClient) answerChoice(ctx context.Context, threadID, callID string, selected *int) error {
	var body any = map[string]bool{"dismiss": true}
	if selected != nil {
		body = map[string]int{"selected": *selected}
	}
	return c.do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(threadID)+"/choices/"+url.PathEscape(callID), body, nil)
}

// threads lists every thread of the runtime, following GET /v1/threads
// page by page.
func (c *apiClient) threads(ctx context.Context) ([]store.Thread, error) {
	return c.listThreads(ctx, "")
}

// children lists the child threads of parent, page by page
// (GET /v1/threads?parent_id=).
func (c *apiClient) children(ctx context.Context, parent string) ([]store.Thread, error) {
	return c.listThreads(ctx, parent)
}

// listPageSize is the page size asked of GET /v1/threads (its maximum).
const listPageSize = 1000

// listThreads follows the pages of GET /v1/threads, of every thread or
// only of parent's children.
func (c *apiClient) listThreads(ctx context.Context, parent string) ([]store.Thread, error) {
	var all []store.Thread
	cursor := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(listPageSize)}}
		if parent != "" {
			q.Set("parent_id", parent)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Threads    []store.Thread `json:"threads"`
			NextCursor string         `json:"next_cursor"`
		}
		if err := c.do(ctx, http.MethodGet, "/v1/threads?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Threads...)
		if page.NextCursor == "" || page.NextCursor == cursor || len(page.Threads) == 0 {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// printThreadTree prints the thread tree built from parent_id: every
// session, or only the session of thread only when it is set. mark is
// labelled as the chat's own thread.
func printThreadTree(w io.Writer, threads []store.Thread, only, mark string) error {
	byID := make(map[string]store.Thread, len(threads))
	kids := map[string][]string{}
	for _, th := range threads {
		byID[th.ID] = th
	}
	var roots []string
	for _, th := range threads {
		if _, ok := byID[th.ParentID]; th.ParentID != "" && ok {
			kids[th.ParentID] = append(kids[th.ParentID], th.ID)
		} else {
			roots = append(roots, th.ID) // a session, or an orphan shown as one
		}
	}
	if only != "" {
		th, ok := byID[only]
		if !ok {
			return fmt.Errorf("thread %q is not in GET /v1/threads; list the threads with 'rap chat --tree'", only)
		}
		seen := map[string]bool{}
		for th.ParentID != "" && !seen[th.ID] {
			seen[th.ID] = true
			p, ok := byID[th.ParentID]
			if !ok {
				break
			}
			th = p
		}
		roots = []string{th.ID}
	}
	if len(roots) == 0 {
		fmt.Fprintln(w, "no threads yet: start one with 'rap chat'")
		return nil
	}
	lines := 0
	visited := map[string]bool{}
	var walk func(id, indent, branch string, depth int)
	walk = func(id, indent, branch string, depth int) {
		if visited[id] {
			return
		}
		visited[id] = true
		if lines == maxTreeLines {
			fmt.Fprintf(w, "%s… more threads not shown (over %d)\n", indent, maxTreeLines)
		}
		lines++
		if lines > maxTreeLines {
			return
		}
		th := byID[id]
		fmt.Fprintf(w, "%s%s%s\n", indent, branch, threadLine(th, mark))
		children := kids[id]
		if len(children) == 0 {
			return
		}
		next := indent
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		if depth >= maxTreeDepth {
			fmt.Fprintf(w, "%s└─ … %d child thread(s) deeper than %d levels not shown\n", next, len(children), maxTreeDepth)
			return
		}
		for i, k := range children {
			b := "├─ "
			if i == len(children)-1 {
				b = "└─ "
			}
			walk(k, next, b, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, "", "", 0)
	}
	return nil
}

// threadLine is one thread of the tree: id, status and origin.
func threadLine(th store.Thread, mark string) string {
	origin := "session"
	switch {
	case th.ParentID == "":
	case th.OriginTool == runtime.BuiltinSpawnThread:
		origin = "spawn_thread"
	case th.OriginTool != "":
		origin = "event of " + th.OriginTool
	default:
		origin = "child"
	}
	if th.ParentID != "" && th.OriginCallID != "" {
		origin += " (call " + th.OriginCallID + ")"
	}
	line := oneLine(clean(th.ID), 100) + "  " + oneLine(clean(orNone(string(th.Status))), 40) + "  " + oneLine(clean(origin), 200)
	if th.ID == mark {
		line += "  ← this chat"
	}
	return line
}

func init() {
	register(&command{
		name:    "chat",
		summary: "talk to a running runtime ('rap serve') in the terminal",
		usage:   "rap chat [--server URL] [--thread ID] [--wait D] [--tree]",
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
	tree   bool
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
	fs.BoolVar(&opts.tree, "tree", false, "print the thread tree (every session, or the session of --thread) and exit")
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

// threadWatch follows one thread's event stream: whether it is running,
// how often it went idle or failed, and whether it was closed.
type threadWatch struct {
	id      string
	mu      sync.Mutex
	state   string // last status: "running", "idle" or "" (unknown)
	idles   int    // idle events seen
	errors  int    // error events seen
	closed  bool   // the thread was closed
	seq     int64  // the Seq of the last message shown
	changed chan struct{}
}

func newThreadWatch(id string) *threadWatch {
	return &threadWatch{id: id, changed: make(chan struct{})}
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
	case "message":
		var m struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(ev.Data, &m) == nil && m.Seq > w.seq {
			w.seq = m.Seq
		}
	case "thread_closed":
		var c struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil && c.ThreadID == w.id {
			w.closed = true
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// shown records that the messages up to seq were shown (from a history).
func (w *threadWatch) shown(msgs []store.Message) {
	if len(msgs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := msgs[len(msgs)-1].Seq; s > w.seq {
		w.seq = s
	}
}

// catchUpGrace bounds how long a client waits for the event stream to
// show a message the runtime already reports saved.
const catchUpGrace = 3 * time.Second

// caughtUp waits until the stream showed the message with Seq seq: the
// runtime saves a turn before it publishes it, so a status read can be
// ahead of the stream. It gives up after catchUpGrace (a message appended
// while no stream was open is never published) and reports whether the
// stream caught up.
func (w *threadWatch) caughtUp(ctx context.Context, seq int64) bool {
	limit := time.NewTimer(catchUpGrace)
	defer limit.Stop()
	for {
		w.mu.Lock()
		done, changed := w.seq >= seq, w.changed
		w.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-changed:
		case <-limit.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// watchState is a snapshot of a threadWatch.
type watchState struct {
	state       string
	idles, errs int
	closed      bool
	changed     <-chan struct{} // closed at the next event
	running     bool
}

// quietFor waits until no event arrived for gap, or at most max.
func (w *threadWatch) quietFor(gap, max time.Duration) {
	limit := time.NewTimer(max)
	defer limit.Stop()
	for {
		t := time.NewTimer(gap)
		select {
		case <-w.snapshot().changed:
			t.Stop()
		case <-t.C:
			return
		case <-limit.C:
			t.Stop()
			return
		}
	}
}

func (w *threadWatch) snapshot() watchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return watchState{state: w.state, idles: w.idles, errs: w.errors, closed: w.closed, changed: w.changed,
		running: w.state == "running"}
}

// followedThread is a thread whose events a follower prints.
type followedThread struct {
	id    string
	tr    *transcript
	watch *threadWatch
	done  chan struct{} // closed when its stream is no longer read
}

// follower prints the events of a thread tree: the thread a client talks
// in and, as they are spawned, its child threads (each event stream opened
// on its thread_spawned event), each with its own transcript prefixed with
// the child's short id. All output is written with mu held.
type follower struct {
	ctx    context.Context
	api    *apiClient
	mu     *sync.Mutex
	asks   *userAsks
	stderr io.Writer
	// after, when set, is called with mu held after each event is shown.
	after func(t *followedThread, ev sseEvent)

	wg      sync.WaitGroup
	tmu     sync.Mutex
	threads map[string]*followedThread // followed, the root included
	known   map[string]bool            // threads followed or deliberately not
	capped  bool                       // maxFollowed was reached
}

func newFollower(ctx context.Context, api *apiClient, mu *sync.Mutex, stderr io.Writer) *follower {
	return &follower{ctx: ctx, api: api, mu: mu, asks: &userAsks{}, stderr: stderr,
		threads: map[string]*followedThread{}, known: map[string]bool{}}
}

// root registers the thread the client talks in; its stream is read by
// the caller, which passes each event to handle.
func (f *follower) root(id string, tr *transcript) *followedThread {
	t := &followedThread{id: id, tr: tr, watch: newThreadWatch(id), done: make(chan struct{})}
	tr.self = id
	f.tmu.Lock()
	f.threads[id], f.known[id] = t, true
	f.tmu.Unlock()
	return t
}

// handle shows one event of thread t and follows the children it starts.
func (f *follower) handle(t *followedThread, ev sseEvent) {
	if ev.Type == "thread_closed" {
		// A child closed: let its own stream finish printing first, so
		// that its lines come before the parent's part of the story.
		var c struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil && c.ThreadID != t.id {
			if k := f.followed(c.ThreadID); k != nil {
				timer := time.NewTimer(childCatchUp)
				select {
				case <-k.done:
				case <-timer.C:
				case <-f.ctx.Done():
				}
				timer.Stop()
			}
		}
	}
	f.mu.Lock()
	t.tr.event(ev)
	f.mu.Unlock()
	f.asks.note(t.id, ev)
	t.watch.note(ev)
	if ev.Type == "thread_spawned" {
		var s struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &s) == nil && s.ThreadID != "" {
			f.follow(s.ThreadID, t.tr)
		}
	}
	if f.after != nil {
		f.mu.Lock()
		f.after(t, ev)
		f.mu.Unlock()
	}
}

// markKnown records threads the client deliberately does not follow (the
// closed children of a resumed thread).
func (f *follower) markKnown(ids ...string) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	for _, id := range ids {
		f.known[id] = true
	}
}

// follow starts printing the events of child thread id, under parent's
// transcript. A thread is followed once.
func (f *follower) follow(id string, parent *transcript) {
	f.tmu.Lock()
	if _, ok := f.threads[id]; ok {
		f.tmu.Unlock()
		return
	}
	f.known[id] = true
	if len(f.threads) > maxFollowed {
		first := !f.capped
		f.capped = true
		f.tmu.Unlock()
		if first {
			f.mu.Lock()
			parent.endLine()
			fmt.Fprintf(f.stderr, "rap chat: following %d child threads already; later ones are not shown (list them with /threads)\n", maxFollowed)
			f.mu.Unlock()
		}
		return
	}
	t := &followedThread{id: id, tr: parent.forChild(id), watch: newThreadWatch(id), done: make(chan struct{})}
	f.threads[id] = t
	f.tmu.Unlock()
	// What the child did so far is shown now, before the caller goes on
	// with the parent's events (the child may well have finished already);
	// the rest is shown as it happens.
	ctx, cancel := context.WithCancel(f.ctx)
	events := f.catchUp(ctx, t)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(t.done)
		defer cancel()
		if t.watch.snapshot().closed {
			return // closed before it was opened: its history said it all
		}
		for ev := range events {
			f.handle(t, ev)
			if t.watch.snapshot().closed {
				return
			}
		}
	}()
}

// catchUp opens a child thread's event stream, then shows what the child
// did before it was opened (the stream is live only) from its history,
// and follows the children it already started. It returns the stream, or
// a closed channel when the child cannot be followed.
func (f *follower) catchUp(ctx context.Context, t *followedThread) <-chan sseEvent {
	events, _, err := f.api.events(ctx, t.id)
	if err != nil {
		if ctx.Err() == nil {
			f.mu.Lock()
			t.tr.endLine()
			fmt.Fprintf(f.stderr, "rap chat: cannot follow child thread %s: %v\n", t.id, err)
			f.mu.Unlock()
		}
		ch := make(chan sseEvent)
		close(ch)
		return ch
	}
	// The state first: when it says closed, the history read after it is
	// complete.
	st, serr := f.api.status(ctx, t.id)
	msgs, herr := f.api.history(ctx, t.id)
	if herr == nil {
		f.mu.Lock()
		t.tr.history(msgs)
		f.mu.Unlock()
		t.watch.shown(msgs)
	}
	if serr == nil {
		// Its open choices now, so that the next line can answer them.
		for _, ev := range st.choiceEvents() {
			f.handle(t, ev)
		}
		for _, k := range st.Children {
			f.follow(k, t.tr)
		}
		if st.Status == string(store.ThreadClosed) {
			t.watch.note(sseEvent{Type: "thread_closed", Data: mustJSON(map[string]string{"thread_id": t.id})})
		}
	}
	return events
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// followed returns the followed thread id, or nil.
func (f *follower) followed(id string) *followedThread {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	return f.threads[id]
}

// waitQuiet waits until every followed thread is quiet: not running,
// nothing queued, no pending call unless the user is asked something, and
// every child it started is followed (or deliberately not). A thread that
// reported an error since errsBefore (the root) or at all (a child) and is
// not running counts as quiet: its input stays queued (RAP RT-4).
func (f *follower) waitQuiet(ctx context.Context, root *followedThread, errsBefore int, wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		busy, err := f.busyThreads(ctx, root, errsBefore)
		if err != nil {
			return err
		}
		if len(busy) == 0 {
			return nil
		}
		select {
		case <-root.watch.snapshot().changed:
		case <-time.After(quietPoll):
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("gave up waiting after %v: %s; their results will appear with 'rap chat --thread %s'", wait, strings.Join(busy, "; "), root.id)
		}
	}
}

// busyThreads describes the followed threads that are not quiet.
func (f *follower) busyThreads(ctx context.Context, root *followedThread, errsBefore int) ([]string, error) {
	f.tmu.Lock()
	list := make([]*followedThread, 0, len(f.threads))
	for _, t := range f.threads {
		list = append(list, t)
	}
	f.tmu.Unlock()
	sort.Slice(list, func(i, j int) bool { // the root first, then by id
		if list[i] == root || list[j] == root {
			return list[i] == root && list[j] != root
		}
		return list[i].id < list[j].id
	})
	open, _ := f.asks.count()
	var busy []string
	for _, t := range list {
		ws := t.watch.snapshot()
		if ws.closed {
			continue
		}
		if t != root {
			select {
			case <-t.done:
				continue // its stream ended
			default:
			}
		}
		eb := 0
		if t == root {
			eb = errsBefore
		}
		name := "thread " + t.id
		if t != root {
			name = "child thread " + shortID(t.id)
		}
		switch {
		case ws.errs > eb && !ws.running:
			continue
		case ws.running:
			busy = append(busy, name+" is running")
			continue
		}
		st, err := f.api.status(ctx, t.id)
		if err != nil {
			if t != root && statusOf(err) == http.StatusNotFound {
				continue
			}
			return nil, err
		}
		if st.Status == string(store.ThreadClosed) {
			continue
		}
		switch {
		case st.Queued > 0:
			busy = append(busy, fmt.Sprintf("%s has %d queued input(s)", name, st.Queued))
		case len(st.PendingCalls) > 0 && open == 0:
			names := make([]string, 0, len(st.PendingCalls))
			for _, c := range st.PendingCalls {
				names = append(names, c.ToolName)
			}
			sort.Strings(names)
			busy = append(busy, fmt.Sprintf("%s has %d tool call(s) still pending (%s)", name, len(names), strings.Join(names, ", ")))
		default:
			// The runtime publishes a turn after saving it: let the
			// stream show what the status says was saved.
			t.watch.caughtUp(ctx, st.LastSeq)
			for _, k := range st.Children {
				f.tmu.Lock()
				known := f.known[k] || f.capped
				f.tmu.Unlock()
				if !known {
					busy = append(busy, name+" started child thread "+shortID(k)+", not followed yet")
					break
				}
			}
		}
	}
	return busy, nil
}

// chat runs the chat loop: it reads lines from in, posts each as a user
// message, and prints the thread's events, and those of the child threads
// it starts, to stdout as they arrive. While a tool's user choice is open,
// a line answers it instead. After each message it waits (up to opts.wait)
// for the thread to go idle — when in is not a terminal, also for its
// tool calls, unless a tool waits for the user; at the end of input it
// waits for the whole thread tree to be quiet, then returns.
func chat(ctx context.Context, opts chatOptions, in io.Reader, interactive bool, stdout, stderr io.Writer) error {
	api, err := newAPIClient(opts.server, opts.token)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if opts.tree {
		list, err := api.threads(ctx)
		if err != nil {
			return err
		}
		return printThreadTree(stdout, list, opts.thread, "")
	}
	threadID := opts.thread
	tr := newTranscript(stdout)
	tr.echoUser = !interactive
	tr.stream = interactive
	tr.showStatus = opts.status
	if threadID == "" {
		if threadID, err = api.createThread(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "thread %s (resume with: rap chat --thread %s)\n", threadID, threadID)
	}
	var earlier []store.Message
	var resumed []store.Thread
	if opts.thread != "" {
		if earlier, err = api.history(ctx, threadID); err != nil {
			return err
		}
		if resumed, err = api.threads(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "thread %s: %d earlier messages\n", threadID, len(earlier))
	}

	streamCtx, stopStream := context.WithCancel(ctx)
	var printMu sync.Mutex // all output: the event readers and this loop write it
	f := newFollower(streamCtx, api, &printMu, stderr)
	root := f.root(threadID, tr)
	events, streamErr, err := api.events(streamCtx, threadID)
	if err != nil {
		stopStream()
		return err
	}
	// prompt shows what the next line is for: a message, or the answer to
	// the oldest open choice. Called with printMu held.
	lastPrompt := ""
	prompt := func() {
		if !interactive {
			return
		}
		p := "you> "
		if c, ok := f.asks.next(); ok {
			p = fmt.Sprintf("choice 1-%d, d to dismiss> ", len(c.choices))
		}
		if tr.line.open == stdout && p == lastPrompt {
			return // already showing
		}
		tr.endLine()
		fmt.Fprint(stdout, p)
		tr.line.open, lastPrompt = stdout, p
	}
	f.after = func(_ *followedThread, ev sseEvent) {
		if ev.Type == "user_choice" {
			prompt()
		}
	}
	readerDone := make(chan struct{})
	first := make(chan struct{})
	gate := make(chan struct{}) // closed once the history of a resumed thread is shown
	go func() {
		defer close(readerDone)
		var once sync.Once
		defer once.Do(func() { close(first) })
		for ev := range events {
			f.handle(root, ev)
			once.Do(func() {
				close(first)
				<-gate
			})
		}
	}()
	defer func() {
		stopStream()
		<-readerDone
		f.wg.Wait()
	}()
	// The stream starts with the session's toolsets: show them before the
	// history and the first prompt.
	select {
	case <-first:
	case <-time.After(2 * time.Second):
	}
	if opts.thread != "" {
		root.watch.shown(earlier)
		printMu.Lock()
		tr.history(earlier)
		if p := pendingCalls(earlier); len(p) > 0 {
			fmt.Fprintf(stdout, "  · %d tool call(s) still waiting for results\n", len(p))
		}
		printMu.Unlock()
		// Follow the children still open; the closed ones are history.
		for _, th := range resumed {
			if th.ParentID != threadID {
				continue
			}
			if th.Status == store.ThreadClosed {
				f.markKnown(th.ID)
			} else {
				f.follow(th.ID, tr)
			}
		}
	}
	close(gate)
	if opts.thread != "" {
		// The stream sends the thread's current views, open choices and
		// authorization links first: show them before reading input, so
		// that a line answers a choice that was open before the chat
		// started. The choices come from the thread's state (exactly); the
		// rest is given a moment to arrive.
		if st, err := api.status(ctx, threadID); err == nil {
			for _, ev := range st.choiceEvents() {
				f.handle(root, ev)
			}
		}
		root.watch.quietFor(primeGap, primeWait)
	}

	lines := make(chan inputLine)
	readErr := make(chan error, 1)
	go func() {
		readErr <- readLines(in, MaxChatLine, func(l inputLine) bool {
			select {
			case lines <- l:
				return true
			case <-streamCtx.Done():
				return false
			}
		})
		close(lines)
	}()

	say := func(w io.Writer, format string, args ...any) {
		printMu.Lock()
		tr.endLine()
		fmt.Fprintf(w, format, args...)
		printMu.Unlock()
	}
	printMu.Lock()
	prompt()
	printMu.Unlock()
	errsAtLastPost := root.watch.snapshot().errs
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
		printMu.Lock()
		if interactive {
			tr.line.open = nil // the terminal echoed the line and its newline
		}
		printMu.Unlock()
		if line.tooLong {
			say(stderr, "rap chat: line %d not sent: it is longer than %d bytes\n", line.n, MaxChatLine)
			printMu.Lock()
			prompt()
			printMu.Unlock()
			continue
		}
		text := strings.TrimSpace(line.text)
		switch {
		case text == "/quit" || text == "/exit":
			return nil
		case text == "/threads":
			list, err := api.threads(ctx)
			printMu.Lock()
			tr.endLine()
			if err == nil {
				err = printThreadTree(stdout, list, threadID, threadID)
			}
			if err != nil {
				fmt.Fprintf(stderr, "rap chat: /threads: %v\n", err)
			}
			prompt()
			printMu.Unlock()
			continue
		case text == "/help":
			say(stdout, "commands: /threads (the thread tree of this session), /quit; a line starting with // sends it with one / less\n")
			printMu.Lock()
			prompt()
			printMu.Unlock()
			continue
		case strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "//"):
			say(stderr, "rap chat: unknown command %q: the commands are /threads, /help and /quit; to send a message that starts with /, start it with //\n", oneLine(text, 40))
			printMu.Lock()
			prompt()
			printMu.Unlock()
			continue
		}
		if c, open := f.asks.next(); open {
			answerChoice(ctx, api, f, c, text, interactive, opts.wait, say)
			printMu.Lock()
			prompt()
			printMu.Unlock()
			continue
		}
		if text == "" {
			printMu.Lock()
			prompt()
			printMu.Unlock()
			continue
		}
		if strings.HasPrefix(text, "//") {
			text = text[1:]
		}
		ws := root.watch.snapshot()
		errsAtLastPost = ws.errs
		_, asked := f.asks.count()
		countBefore, err := countUserText(ctx, api, threadID, text)
		if err != nil {
			return err
		}
		if err := api.postMessage(ctx, threadID, text); err != nil {
			// Nothing was accepted: say so and go on with the next line.
			say(stderr, "rap chat: message not sent: %v\n", err)
			printMu.Lock()
			prompt()
			printMu.Unlock()
			continue
		}
		goal := settleGoal{text: text, countBefore: countBefore, needIdle: true, idlesBefore: ws.idles, errsBefore: ws.errs,
			allCalls: !interactive, asks: f.asks, asksBefore: asked}
		if err := waitSettled(ctx, api, root.watch, threadID, goal, opts.wait); err != nil {
			say(stderr, "rap chat: %v\n", err)
		}
		printMu.Lock()
		prompt()
		printMu.Unlock()
	}
	// End of input: wait for the thread tree to be quiet, pending calls
	// included.
	if err := f.waitQuiet(ctx, root, errsAtLastPost, opts.wait); err != nil {
		printMu.Lock()
		tr.endLine()
		printMu.Unlock()
		return err
	}
	printMu.Lock()
	defer printMu.Unlock()
	tr.endLine()
	if root.watch.snapshot().errs > errsAtLastPost {
		fmt.Fprintf(stderr, "rap chat: the runtime reported an error; the unanswered message stays queued and is retried with the next message (resume with --thread %s)\n", threadID)
	}
	for _, d := range f.asks.describe() {
		fmt.Fprintf(stderr, "rap chat: %s; answer it with 'rap chat --thread %s'\n", d, threadID)
	}
	return nil
}

// answerChoice sends the user's answer text to open choice c. A line that
// is not an answer, or an answer the runtime refuses, leaves the choice
// open. When the chat is not interactive it then waits for the thread of
// the choice to settle, so that a script's next line follows the tool's
// result.
func answerChoice(ctx context.Context, api *apiClient, f *follower, c openChoice, text string, interactive bool, wait time.Duration,
	say func(io.Writer, string, ...any)) {
	selected, err := parseChoiceAnswer(text, len(c.choices))
	if err != nil {
		say(f.stderr, "rap chat: %v; the question stays open\n", err)
		return
	}
	t := f.followed(c.threadID)
	var before watchState
	if t != nil {
		before = t.watch.snapshot()
	}
	_, asked := f.asks.count()
	err = api.answerChoice(ctx, c.threadID, c.callID, selected)
	switch {
	case err == nil:
		f.asks.drop(c.threadID, c.callID)
	case statusOf(err) == http.StatusNotFound:
		f.asks.drop(c.threadID, c.callID)
		say(f.stderr, "rap chat: %s's question is no longer open (answered elsewhere, or the tool finished): %v\n", toolLabel(c.tool), err)
		return
	default:
		say(f.stderr, "rap chat: answer not delivered: %v; the question stays open, answer again\n", err)
		return
	}
	if interactive || t == nil {
		return
	}
	goal := settleGoal{needIdle: true, idlesBefore: before.idles, errsBefore: before.errs, allCalls: true, asks: f.asks, asksBefore: asked}
	if err := waitSettled(ctx, api, t.watch, c.threadID, goal, wait); err != nil {
		say(f.stderr, "rap chat: %v\n", err)
	}
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
	Status       string `json:"status"`
	Queued       int    `json:"queued"`
	LastSeq      int64  `json:"last_seq"`
	PendingCalls []struct {
		CallID   string `json:"call_id"`
		ToolName string `json:"tool_name"`
	} `json:"pending_calls"`
	Children []string `json:"children"`
	Choices  []struct {
		CallID   string   `json:"call_id"`
		ToolName string   `json:"tool_name"`
		Prompt   string   `json:"prompt"`
		Choices  []string `json:"choices"`
		Default  int      `json:"default"`
	} `json:"choices"`
}

// choiceEvents returns the thread's open choices as user_choice events,
// as the event stream sends them on connect.
func (st *threadStatus) choiceEvents() []sseEvent {
	var out []sseEvent
	for _, c := range st.Choices {
		out = append(out, sseEvent{Type: "user_choice", Data: mustJSON(map[string]any{
			"call_id": c.CallID, "name": c.ToolName, "prompt": c.Prompt, "choices": c.Choices, "default": c.Default})})
	}
	return out
}

// status reads the thread's state, queue length, pending calls and
// children.
func (c *apiClient) status(ctx context.Context, threadID string) (*threadStatus, error) {
	var st threadStatus
	if err := c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(threadID), nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// settleGoal says what waitSettled waits for.
type settleGoal struct {
	// text is the message posted ("" when none): it must appear more than
	// countBefore times in the history, followed by an assistant message.
	text        string
	countBefore int
	// needIdle requires the thread to go idle more than idlesBefore times
	// (it ran after the post), or a new ask of the user.
	needIdle    bool
	idlesBefore int
	// An error event beyond errsBefore ends the wait (the input stays
	// queued, RAP RT-4).
	errsBefore int
	// allCalls also waits for the thread's pending calls, unless asks has
	// an open ask (a tool waits for the user, who answers on the next
	// line). asksBefore is how many asks asks had seen before.
	allCalls   bool
	asks       *userAsks
	asksBefore int
}

// waitSettled waits, up to wait, until thread threadID reached goal, was
// closed, or reported an error.
func waitSettled(ctx context.Context, api *apiClient, w *threadWatch, threadID string, g settleGoal, wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	var last *threadStatus
	for {
		ws := w.snapshot()
		if ws.closed || ws.errs > g.errsBefore && !ws.running {
			return nil
		}
		open, added := 0, 0
		if g.asks != nil {
			open, added = g.asks.count()
		}
		ready := !ws.running
		if g.needIdle {
			ready = ws.state == "idle" && ws.idles > g.idlesBefore || open > 0 && added > g.asksBefore && !ws.running
		}
		if ready {
			st, err := api.status(ctx, threadID)
			if err != nil {
				return err
			}
			last = st
			if st.Status == string(store.ThreadClosed) {
				return nil
			}
			if st.Queued == 0 && (!g.allCalls || len(st.PendingCalls) == 0 || open > 0) {
				// What the status says was saved is shown before the
				// caller goes on.
				w.caughtUp(ctx, st.LastSeq)
				if g.text == "" {
					return nil
				}
				msgs, err := api.history(ctx, threadID)
				if err != nil {
					return err
				}
				if settledIn(msgs, g.text, g.countBefore) {
					return nil
				}
			}
		}
		select {
		case <-ws.changed:
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
