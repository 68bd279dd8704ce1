package termchat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// testRuntime is a real runtime with a SQLite store in a temporary
// directory, served over loopback HTTP.
type testRuntime struct {
	*runtime.Runtime
	URL   string
	Store *sqlite.Store
}

// startGettime serves the gettime example tool server over loopback.
func startGettime(t testing.TB, opts *rap.ServerOptions) string {
	t.Helper()
	if opts == nil {
		opts = &rap.ServerOptions{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := gettime.New(opts)
	srv := serveToolServer(t, s)
	return srv.URL
}

// startTestRuntime runs a runtime playing turns against toolServers.
func startTestRuntime(t testing.TB, m model.Provider, toolServers ...string) *testRuntime {
	t.Helper()
	return startTestRuntimeWith(t, m, nil, toolServers...)
}

// startTestRuntimeWith is startTestRuntime with tweak, when not nil,
// changing the runtime's Config.
func startTestRuntimeWith(t testing.TB, m model.Provider, tweak func(*runtime.Config), toolServers ...string) *testRuntime {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := runtime.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	cfg := runtime.Config{
		Store: st, Model: m, ToolServers: toolServers, PublicURL: srv.URL, Secret: secret,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		DisplayText: displayText,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	rt, err := runtime.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	handler = rt.Handler()
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt.Shutdown(ctx)
		srv.Close()
		st.Close()
	})
	return &testRuntime{Runtime: rt, URL: srv.URL, Store: st}
}

// timeScript is a scripted conversation: the model asks gettime for the
// time in Tokyo and answers from the result.
func timeScript() *scripted.Model {
	return scripted.New([]scripted.Turn{
		{AfterUser: "Tokyo", Text: "Asking the clock.", ToolCalls: []scripted.Call{{Name: "get_time_in_zone", Arguments: json.RawMessage(`{"timezone":"Asia/Tokyo"}`)}}},
		{When: &scripted.When{LastInput: "tool_result"}, Text: "Tokyo time: {{last_result}}"},
		{AfterUser: "fail", Error: "the model is down"},
		{Text: "You said: {{last_user}}", Repeat: true},
	})
}

func runChatFor(t *testing.T, opts Options, input string) (stdout, stderr string, err error) {
	t.Helper()
	if opts.Wait == 0 {
		opts.Wait = 30 * time.Second
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts.In, opts.Stdout, opts.Stderr = strings.NewReader(input), &out, &errOut
	err = Run(ctx, opts)
	return out.String(), errOut.String(), err
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q; output:\n%s", w, out)
		}
	}
}

// The chat client shows the conversation as it happens, including the tool
// call with its display text and the tool's result, then exits at the end
// of input once the thread is idle; resuming prints the history.
func TestChatScriptedConversationAndResume(t *testing.T) {
	rt := startTestRuntime(t, timeScript(), startGettime(t, nil))
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "What time is it in Tokyo?\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out,
		"thread ",
		"toolsets loaded: gettime",
		"you: What time is it in Tokyo?",
		"assistant: Asking the clock.",
		"→ Time in Asia/Tokyo", // RAP DS-1: the tool's display script renders the call
		"← get_time_in_zone: ",
		"+09:00",
		"assistant: Tokyo time: ",
	)
	// The transcript follows the history's order.
	iCall, iRes, iAns := strings.Index(out, "→ Time in"), strings.Index(out, "← get_time_in_zone"), strings.Index(out, "Tokyo time:")
	if !(iCall < iRes && iRes < iAns) {
		t.Errorf("transcript out of order (call %d, result %d, answer %d):\n%s", iCall, iRes, iAns, out)
	}

	threads, err := rt.Threads(context.Background())
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads = %v, %v", threads, err)
	}
	id := threads[0].ID
	if !strings.Contains(out, "rap chat --thread "+id) {
		t.Errorf("chat should tell how to resume the thread; output:\n%s", out)
	}

	// Resume: the history is printed, then a new message is answered.
	out2, errOut2, err := runChatFor(t, Options{Server: rt.URL, Thread: id}, "hello again\n")
	if err != nil {
		t.Fatalf("resume: %v\nstderr: %s", err, errOut2)
	}
	wantLines(t, out2,
		"thread "+id+": 4 earlier messages",
		"you: What time is it in Tokyo?",
		"→ Time in Asia/Tokyo",
		"assistant: Tokyo time: ",
		"you: hello again",
		"assistant: You said: hello again",
	)
	if i, j := strings.Index(out2, "toolsets loaded"), strings.Index(out2, "you: What time"); i < 0 || i > j {
		t.Errorf("resume should show the session's toolsets before the history:\n%s", out2)
	}
	msgs, err := rt.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if n := countUser(msgs, "hello again"); n != 1 {
		t.Errorf("history has %d copies of the resumed message, want 1", n)
	}
}

func countUser(msgs []api.Message, text string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == api.RoleUser && m.Text == text {
			n++
		}
	}
	return n
}

// "/quit" ends the chat; lines after it are not sent.
func TestChatQuit(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "first\n/quit\nsecond\n")
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	wantLines(t, out, "you: first", "assistant: You said: first")
	if strings.Contains(out, "second") {
		t.Errorf("a line after /quit was sent:\n%s", out)
	}
}

// A model failure is shown; the message is kept (RAP RT-4), and the chat
// ends with a failure status that says so (a failed chat does
// not exit 0).
func TestChatModelFailure(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, Options{Server: rt.URL, Wait: 20 * time.Second}, "please fail\n")
	if ExitCode(err) != ExitFailure {
		t.Fatalf("chat: err = %v (exit %d), want exit 1\n%s", err, ExitCode(err), errOut)
	}
	wantLines(t, out, "! error: ", "the model is down")
	if !strings.Contains(err.Error(), "stays queued") {
		t.Errorf("the error should say the message is kept: %v", err)
	}
	threads, _ := rt.Threads(context.Background())
	var queued []store.InboxItem
	rt.Store.View(context.Background(), func(tx store.Tx) error {
		var err error
		queued, err = tx.Queued(threads[0].ID)
		return err
	})
	if len(queued) != 1 {
		t.Errorf("the failed message should stay queued (RAP RT-4); queued = %d", len(queued))
	}
}

// Bad input: an unknown thread, an unreachable server, a malformed URL.
// Each is an error that says what was wrong.
func TestChatErrors(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	_, _, err := runChatFor(t, Options{Server: rt.URL, Thread: "no-such-thread"}, "")
	if err == nil || !strings.Contains(err.Error(), "no-such-thread") || !strings.Contains(strings.ToLower(err.Error()), "not found") {
		t.Errorf("unknown thread: err = %v", err)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	_, _, err = runChatFor(t, Options{Server: deadURL}, "hi\n")
	if err == nil || !strings.Contains(err.Error(), "rap serve") {
		t.Errorf("server down: err = %v, want a hint to start 'rap serve'", err)
	}

	_, _, err = runChatFor(t, Options{Server: "localhost:8080"}, "")
	if ExitCode(err) != ExitUsage {
		t.Errorf("malformed server URL: err = %v, want a usage error", err)
	}
}

// A message the runtime refuses is reported and nothing already accepted
// is lost: the chat continues and the earlier message stays in the
// history; the chat then exits 1 (a refusal is not a success).
func TestChatRefusedMessageKeepsEarlier(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	big := strings.Repeat("x", runtime.MaxMessageBytes+10)
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "first\n"+big+"\nthird\n")
	if ExitCode(err) != ExitFailure || !strings.Contains(err.Error(), "refused 1") {
		t.Fatalf("chat: err = %v (exit %d), want exit 1 naming the refusal\n%s", err, ExitCode(err), errOut)
	}
	if !strings.Contains(errOut, "message not sent") || !strings.Contains(errOut, "Bad Request") {
		t.Errorf("stderr should report the refused message; got %q", errOut)
	}
	wantLines(t, out, "you: first", "you: third", "You said: third")
	threads, _ := rt.Threads(context.Background())
	msgs, _ := rt.History(context.Background(), threads[0].ID)
	if countUser(msgs, "first") != 1 || countUser(msgs, "third") != 1 {
		t.Errorf("history lost an accepted message: %+v", msgs)
	}
}

// The chat's client sends the bearer token when the server requires one.
func TestChatToken(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	protected := httptest.NewServer(requireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Forward to the runtime.
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, rt.URL+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	}), "s3cret"))
	defer protected.Close()
	_, _, err := runChatFor(t, Options{Server: protected.URL}, "hi\n")
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") || !strings.Contains(err.Error(), "RAP_TOKEN") {
		t.Errorf("without token: err = %v", err)
	}
	out, errOut, err := runChatFor(t, Options{Server: protected.URL, Token: "s3cret"}, "hi\n")
	if err != nil {
		t.Fatalf("with token: %v\n%s", err, errOut)
	}
	wantLines(t, out, "You said: hi")
}

// RAP RE-3: a client renders the first display_as segment of a type it
// supports (text, diff, image), skips unknown ones, and falls back to the
// text; results are shortened without splitting a character, and a result
// already shown is not shown again.
func TestTranscriptResults(t *testing.T) {
	var b bytes.Buffer
	tr := newTranscript(&b, Display{ImageDir: t.TempDir()})
	tr.maxResultLines, tr.maxResultChars = 3, 40
	unknown := rap.DisplaySegment{Type: "hologram", Content: json.RawMessage(`{"x":1}`)}
	tr.toolResult(api.ToolResult{CallID: "1", Name: "edit", Text: "model text",
		DisplayAs: []rap.DisplaySegment{unknown, rap.DiffSegment("a.go", "@@ -1 +1 @@\n-a\n+b\n"), rap.TextSegment("for people")}})
	tr.toolResult(api.ToolResult{CallID: "1", Name: "edit", Text: "duplicate"})
	tr.toolResult(api.ToolResult{CallID: "2", Name: "long", Text: "l1\nl2\nl3\nl4\nl5"})
	tr.toolResult(api.ToolResult{CallID: "3", Name: "wide", Text: strings.Repeat("é", 50), IsError: true})
	tr.toolResult(api.ToolResult{CallID: "4", Name: "img", Content: []rap.ContentItem{rap.TextContent("see"), rap.ImageContent("AAAA", "image/png")}})
	tr.toolResult(api.ToolResult{CallID: "5", Name: "odd", Text: "plain fallback", DisplayAs: []rap.DisplaySegment{unknown}})
	tr.toolResult(api.ToolResult{CallID: "6", Name: "shot", Text: "a screenshot", DisplayAs: []rap.DisplaySegment{rap.ImageSegment("QUJD", "image/webp"), rap.TextSegment("later")}})
	tr.toolResult(api.ToolResult{CallID: "7", Name: "say", Text: "model", DisplayAs: []rap.DisplaySegment{rap.TextSegment("for people")}})
	tr.toolResult(api.ToolResult{CallID: "8", Name: "esc", Text: "red \x1b[31malert\x1b[0m\r"})
	out := b.String()
	wantLines(t, out,
		"← edit: diff a.go\n      @@ -1 +1 @@\n      -a\n      +b\n", // the diff: its path and patch lines
		"← long: l1\n      l2\n      l3 … (shortened)",
		"← wide (error): ",
		"← img: see\n      [image image/png]",
		"← odd: plain fallback", // only an unknown segment: the text
		"← shot: [image image/webp]\n      ↳ image/webp, 3 bytes: file://", // the image segment, never its bytes; a link to a copy
		"← say: for people",
		"← esc: red \uFFFD[31malert\uFFFD[0m\n", // no terminal escape sequences pass
	)
	for _, bad := range []string{"duplicate", "AAAA", "QUJD", "model text", "hologram", "later", "\x1b", "\r"} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains %q:\n%s", bad, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if !utf8Valid(line) {
			t.Errorf("shortening split a character: %q", line)
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestPendingCalls(t *testing.T) {
	msgs := []api.Message{
		{Role: api.RoleAssistant, ToolCalls: []api.ToolCall{{ID: "a", Name: "x"}, {ID: "b", Name: "y"}}},
		{Role: api.RoleTool, ToolResults: []api.ToolResult{{CallID: "a"}}},
	}
	p := pendingCalls(msgs)
	if len(p) != 1 || p["b"] != "y" {
		t.Errorf("pendingCalls = %v", p)
	}
}

func TestReadLines(t *testing.T) {
	in := "short\n" + strings.Repeat("y", 100) + "\nlast without newline"
	var got []inputLine
	err := readLines(strings.NewReader(in), 50, func(l inputLine) bool { got = append(got, l); return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d lines: %+v", len(got), got)
	}
	if got[0].text != "short" || got[0].tooLong {
		t.Errorf("line 1 = %+v", got[0])
	}
	if !got[1].tooLong || got[1].text != "" || got[1].n != 2 {
		t.Errorf("line 2 should be dropped as too long: %+v", got[1])
	}
	if got[2].text != "last without newline" || got[2].n != 3 {
		t.Errorf("line 3 = %+v", got[2])
	}
}

// In a terminal, assistant text streams as it is generated and is not
// printed again when the turn is saved.
func TestTranscriptStreaming(t *testing.T) {
	var b bytes.Buffer
	tr := newTranscript(&b, Display{})
	tr.stream = true
	ev := func(typ, data string) { tr.event(Event{Type: typ, Data: json.RawMessage(data)}) }
	ev("text_delta", `{"text":"Hello "}`)
	ev("text_delta", `{"text":"world"}`)
	ev("message", `{"role":"assistant","text":"Hello world","tool_calls":[{"id":"c1","name":"get_time","arguments":{},"display":"Checking the time"}]}`)
	ev("tool_call", `{"call_id":"c1","name":"get_time","arguments":{},"display":"Checking the time"}`)
	ev("message", `{"role":"tool","tool_results":[{"call_id":"c1","name":"get_time","text":"noon"}]}`)
	ev("tool_result", `{"call_id":"c1","name":"get_time","text":"noon"}`)
	ev("message", `{"role":"assistant","text":"It is noon."}`)
	ev("error", `{"message":"model down"}`)
	want := "assistant: Hello world\n  → Checking the time\n  ← get_time: noon\nassistant: It is noon.\n  ! error: model down\n"
	if b.String() != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", b.String(), want)
	}
}

// interactTools is an SDK tool server whose tools use the interactive
// parts of RAP: deploy asks the user (RAP UC-1), login needs an
// authorization (RAP OA-1), render updates views and returns display_as
// segments (RAP VU-1, RE-3), and watch is a subscription whose one event,
// sent when the test fires it, is handled in a child thread (RAP SU-6).
type interactTools struct {
	URL     string
	picked  chan int      // what deploy's AskUser returned (RAP UC-2)
	granted chan struct{} // closed: login's authorization is granted
	fire    chan string   // the text of watch's event
}

const testAuthURL = "https://auth.example.com/authorize?client=gorap&state=SECRET-STATE-42"

func startInteractTools(t *testing.T) *interactTools {
	t.Helper()
	it := &interactTools{picked: make(chan int, 10), granted: make(chan struct{}), fire: make(chan string, 1)}
	srv := rap.NewServer("interact", &rap.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rap.AddTool(srv, &rap.Tool{Name: "deploy", Description: "deploys after asking where"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		i, err := c.AskUser(ctx, "Deploy where?", []string{"staging", "production"}, 0, 0)
		if err != nil {
			return nil, err
		}
		it.picked <- i
		return rap.Text("deployed to " + []string{"staging", "production"}[i]), nil
	})
	rap.AddTool(srv, &rap.Tool{Name: "login", Description: "logs in"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		if err := c.RequestOAuth(ctx, testAuthURL); err != nil {
			return nil, err
		}
		select {
		case <-it.granted:
			return rap.Text("logged in as ada"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	rap.AddTool(srv, &rap.Tool{Name: "render", Description: "renders"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		for _, pct := range []int{50, 100} {
			if err := c.UpdateView(ctx, "progress", map[string]int{"pct": pct}); err != nil {
				return nil, err
			}
		}
		if err := c.UpdateView(ctx, "summary", map[string]any{"files": []string{"a.go", "b.go"}, "title": "two files"}); err != nil {
			return nil, err
		}
		return &rap.Reply{Text: "rendered 2 files",
			DisplayAs: []rap.DisplaySegment{rap.DiffSegment("a.go", "@@ -1 +1 @@\n-old line\n+new line\n"), rap.TextSegment("2 files")}}, nil
	})
	rap.AddSubscription(srv, &rap.Tool{Name: "watch", Description: "watches the news"}, func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
		select {
		case text := <-it.fire:
			return sub.Final(ctx, text, false)
		case <-ctx.Done():
			return nil
		}
	})
	hs := serveToolServer(t, srv)
	it.URL = hs.URL
	return it
}

// interactScript plays the conversations of the interactive tests.
func interactScript() *scripted.Model {
	call := func(name, args string) []scripted.Call {
		return []scripted.Call{{Name: name, Arguments: json.RawMessage(args)}}
	}
	return scripted.New([]scripted.Turn{
		// A child thread started for a watch event closes with a report.
		{When: &scripted.When{UserContains: "was started to handle", LastInput: "user"}, Repeat: true,
			ToolCalls: call("close_thread", `{"thread_id": "{{thread_id}}", "report_to_parent": "the news was handled"}`)},
		{When: &scripted.When{LastResultContains: "the news was handled", LastInput: "tool_result"}, Text: "A child handled the news.", Repeat: true},
		{When: &scripted.When{UserContains: "deploy", LastInput: "user"}, ToolCalls: call("deploy", `{}`), Repeat: true},
		{When: &scripted.When{LastResultContains: "deployed to", LastInput: "tool_result"}, Text: "Result: {{last_result}}", Repeat: true},
		{When: &scripted.When{UserContains: "asked the user to authorize", LastInput: "user"}, Text: "Please open the link."},
		{When: &scripted.When{UserContains: "logged in as ada"}, Text: "You are in."},
		{AfterUser: "log me in", ToolCalls: call("login", `{}`)},
		{AfterUser: "render", ToolCalls: call("render", `{}`)},
		{When: &scripted.When{LastResultContains: "rendered", LastInput: "tool_result"}, Text: "Rendered."},
		{AfterUser: "watch", ToolCalls: call("watch", `{}`)},
		{When: &scripted.When{LastResultContains: "Subscribed", LastInput: "tool_result"}, Text: "Watching."},
		{Text: "ok", Repeat: true},
	})
}

// chatDriver runs a chat whose stdin is a pipe, so that a test can write
// a line after it saw the output it waits for.
type chatDriver struct {
	in          *io.PipeWriter
	out, errOut *syncBuffer
	done        chan error
}

func startChat(t *testing.T, opts Options, interactive bool) *chatDriver {
	t.Helper()
	return startChatOn(t, opts, interactive, nil)
}

// startChatWith runs an interactive chat reading its lines with lines.
func startChatWith(t *testing.T, opts Options, lines *testLines) *chatDriver {
	t.Helper()
	return startChatOn(t, opts, true, lines)
}

func startChatOn(t *testing.T, opts Options, interactive bool, lines *testLines) *chatDriver {
	t.Helper()
	if opts.Wait == 0 {
		opts.Wait = 30 * time.Second
	}
	pr, pw := io.Pipe()
	d := &chatDriver{in: pw, out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	go func() {
		defer cancel()
		opts.Stdout, opts.Stderr = d.out, d.errOut
		if lines != nil {
			lines.r, lines.out = bufio.NewReader(pr), d.out
			opts.Lines = lines
		} else if interactive {
			opts.Lines = &testLines{r: bufio.NewReader(pr), out: d.out}
		} else {
			opts.In = pr
		}
		d.done <- Run(ctx, opts)
	}()
	t.Cleanup(func() { pw.Close(); <-d.done })
	return d
}

func (d *chatDriver) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(d.in, line+"\n"); err != nil {
		t.Fatalf("write %q to the chat: %v", line, err)
	}
}

// waitOut waits until the output contains want.
func (d *chatDriver) waitOut(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the chat's output within 30s; output:\n%s\nstderr:\n%s", want, d.out.String(), d.errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish ends the input and returns chat's error.
func (d *chatDriver) finish(t *testing.T) error {
	t.Helper()
	d.in.Close()
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("chat did not return within 60s of the end of its input")
		return nil
	}
}

// RAP UC-1, UC-2: a tool's question is shown as a numbered picker; a
// number answers it (the tool gets the 0-based index), a line that is not
// an answer is refused and the question stays open, and an empty line
// dismisses it, which sends the default. Piped input works line by line.
func TestChatUserChoicePicker(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, interactScript(), tools.URL)
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "deploy please\n7\n2\ndeploy again\n\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out,
		"? deploy asks: Deploy where?\n      1) staging  (default)\n      2) production\n",
		"Answer with a number from 1 to 2",
		"· deploy's question answered: 2) production",
		"Result: deployed to production",
		"· deploy's question was dismissed; the tool gets its default, 1) staging",
		"Result: deployed to staging",
	)
	if !strings.Contains(errOut, `"7" is not an answer: type a number from 1 to 2`) || !strings.Contains(errOut, "the question stays open") {
		t.Errorf("a bad answer should be refused, keeping the question open; stderr: %q", errOut)
	}
	// The tool got index 1 for "2", then the default 0 for the dismissal.
	for i, want := range []int{1, 0} {
		select {
		case got := <-tools.picked:
			if got != want {
				t.Errorf("answer %d: the tool got index %d, want %d", i+1, got, want)
			}
		default:
			t.Fatalf("answer %d did not reach the tool", i+1)
		}
	}
	// The transcript keeps the order: question, answer, result, next question.
	order := []string{"Deploy where?", "answered: 2) production", "deployed to production", "you: deploy again", "was dismissed", "deployed to staging"}
	last := -1
	for _, s := range order {
		i := strings.Index(out[last+1:], s)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", s, out)
		}
		last += 1 + i
	}
	// "7" and "2" were answers, not messages.
	threads, _ := rt.Threads(context.Background())
	msgs, _ := rt.History(context.Background(), threads[0].ID)
	if countUser(msgs, "7") != 0 || countUser(msgs, "2") != 0 {
		t.Errorf("an answer was sent as a message: %+v", msgs)
	}
}

// In a terminal the picker changes the prompt, and the answer goes to the
// tool.
func TestChatUserChoiceInteractive(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, interactScript(), tools.URL)
	d := startChat(t, Options{Server: rt.URL}, true)
	d.waitOut(t, "you> ")
	d.send(t, "deploy please")
	d.waitOut(t, "choice 1-2, d to dismiss> ")
	d.send(t, "d")
	d.waitOut(t, "Result: deployed to staging")
	if err := d.finish(t); err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, d.errOut.String())
	}
	select {
	case got := <-tools.picked:
		if got != 0 {
			t.Errorf("dismissal sent index %d, want the default 0 (RAP UC-2)", got)
		}
	default:
		t.Fatal("the dismissal did not reach the tool")
	}
}

// RAP OA-1: the authorization link is shown clearly, also when the chat
// resumes the thread while the call still waits; the chat does not wait
// for a call that waits for the user; the link never goes to stderr (the
// log of a chat); after the grant the result arrives as usual.
func TestChatOAuthLink(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, interactScript(), tools.URL)
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "log me in\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out, "🔐 login needs your authorization", "Authorize at: "+testAuthURL+"\n", "assistant: Please open the link.")
	if n := strings.Count(out, "Authorize at:"); n != 1 {
		t.Errorf("the link is shown %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(errOut, "login waits for your authorization") {
		t.Errorf("at the end of input the chat should say the call waits for the user; stderr: %q", errOut)
	}
	if strings.Contains(errOut, "SECRET-STATE") {
		t.Errorf("the authorization link reached stderr: %q", errOut)
	}
	threads, _ := rt.Threads(context.Background())
	id := threads[0].ID

	// Resuming shows the link again: it is replayed on connect.
	out2, errOut2, err := runChatFor(t, Options{Server: rt.URL, Thread: id}, "")
	if err != nil {
		t.Fatalf("resume: %v\nstderr: %s", err, errOut2)
	}
	wantLines(t, out2, "Authorize at: "+testAuthURL)

	close(tools.granted)
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs, _ := rt.History(context.Background(), id)
		if n := len(msgs); n > 0 && msgs[n-1].Text == "You are in." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the result of the authorized call did not arrive: %+v", msgs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out3, _, err := runChatFor(t, Options{Server: rt.URL, Thread: id}, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out3, "Authorize at:") {
		t.Errorf("the link is still shown after the result arrived:\n%s", out3)
	}
	wantLines(t, out3, "← login: logged in as ada", "assistant: You are in.")
}

// RAP VU-1, VU-2, RE-3: view updates are shown as one-line summaries, the
// latest of each view is shown again on resume, and a result's diff
// segment is shown with its path and patch lines.
func TestChatViewsAndDisplaySegments(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, interactScript(), tools.URL)
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "render it\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out,
		// A progress view is drawn as a progress bar.
		"· progress [████████████░░░░░░░░░░░░]  50%\n",
		"· progress [████████████████████████] 100%\n",
		`· view summary: files: [2 items], title: "two files"`,
		"← render: diff a.go\n      @@ -1 +1 @@\n      -old line\n      +new line\n",
		"assistant: Rendered.",
	)
	if strings.Contains(out, "rendered 2 files") {
		t.Errorf("the model's text was shown instead of the display segment:\n%s", out)
	}
	threads, _ := rt.Threads(context.Background())
	out2, _, err := runChatFor(t, Options{Server: rt.URL, Thread: threads[0].ID}, "")
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, out2, "· progress [████████████████████████] 100%", "· view summary: ")
	if strings.Contains(out2, " 50%") {
		t.Errorf("resume replayed an old view content:\n%s", out2)
	}
}

// RAP SU-6: an event handled in a child thread is followed: the chat
// opens the child's event stream and prints what it does, prefixed with
// its short id; /threads and --tree print the tree from parent_id.
func TestChatFollowsChildThreadsAndTree(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, interactScript(), tools.URL)
	d := startChat(t, Options{Server: rt.URL}, false)
	d.send(t, "watch the news")
	d.waitOut(t, "assistant: Watching.")
	tools.fire <- `{"headline":"RAW-EVENT"}`
	d.waitOut(t, "assistant: A child handled the news.")
	d.send(t, "/threads")
	d.waitOut(t, "← this chat")
	if err := d.finish(t); err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, d.errOut.String())
	}
	threads, err := rt.Threads(context.Background())
	if err != nil || len(threads) != 2 {
		t.Fatalf("threads = %+v, %v; want the root and one child", threads, err)
	}
	root, child := threads[0], threads[1]
	if child.ParentID != root.ID {
		root, child = child, root
	}
	if root.Title == "" {
		t.Fatal("the session has no title; want the one derived from its first message")
	}
	p := "  [" + shortID(child.ID) + "] "
	out := d.out.String()
	wantLines(t, out,
		"· child thread "+shortID(child.ID)+" started (subscription event of watch)",
		p+"  ← event: {\"headline\":\"RAW-EVENT\"}", // the event, in the child only
		// Thread ids in tool text are the short ids the
		// transcript labels threads with.
		p+"» [runtime] This thread ("+shortID(child.ID)+") was started",
		p+"  → close_thread(",
		"· thread "+shortID(child.ID)+" closed",
		"← event: Final report from child thread "+shortID(child.ID)+":",
		// The tree: /threads.
		root.ID+"  active  session "+strconv.Quote(root.Title)+"  ← this chat\n└─ "+child.ID+"  closed  event of watch (call "+child.OriginCallID+")\n",
	)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "RAW-EVENT") && !strings.HasPrefix(line, p) {
			t.Errorf("the raw event shows outside the child's lines: %q", line)
		}
	}

	// rap chat --tree prints the same tree and exits; an unknown thread is
	// an error naming it.
	tree, errOut, err := runChatFor(t, Options{Server: rt.URL, Tree: true}, "")
	if err != nil {
		t.Fatalf("--tree: %v\n%s", err, errOut)
	}
	if want := root.ID + "  active  session " + strconv.Quote(root.Title) + "\n└─ " + child.ID + "  closed  event of watch (call " + child.OriginCallID + ")\n"; tree != want {
		t.Errorf("--tree printed:\n%s\nwant:\n%s", tree, want)
	}
	_, _, err = runChatFor(t, Options{Server: rt.URL, Tree: true, Thread: "nope"}, "")
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("--tree --thread nope: err = %v", err)
	}
}

// RAP UC-1, UC-2: a choice still open when a chat ends is shown again by
// the next chat on the thread, whose first line answers it; a choice
// answered by another client is shown as answered and the next line is a
// message again.
func TestChatUserChoiceAcrossClients(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, interactScript(), tools.URL)
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "deploy please\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out, "? deploy asks: Deploy where?")
	if !strings.Contains(errOut, "deploy waits for your choice") || !strings.Contains(errOut, "rap chat --thread ") {
		t.Errorf("the chat should say a choice is left open and how to answer it; stderr: %q", errOut)
	}
	threads, _ := rt.Threads(context.Background())
	id := threads[0].ID

	out2, errOut2, err := runChatFor(t, Options{Server: rt.URL, Thread: id}, "2\n")
	if err != nil {
		t.Fatalf("resume: %v\nstderr: %s", err, errOut2)
	}
	wantLines(t, out2, "? deploy asks: Deploy where?", "answered: 2) production", "Result: deployed to production")
	if got := <-tools.picked; got != 1 {
		t.Errorf("the tool got index %d, want 1", got)
	}

	// Another client answers while this chat shows the question.
	d := startChat(t, Options{Server: rt.URL, Thread: id}, false)
	d.send(t, "deploy once more")
	d.waitOut(t, "Answer with a number from 1 to 2")
	choices, err := rt.PendingChoices(context.Background(), id)
	if err != nil || len(choices) != 1 {
		t.Fatalf("pending choices = %+v, %v", choices, err)
	}
	sel := 0
	if _, err := rt.AnswerChoice(context.Background(), id, choices[0].CallID, &sel); err != nil {
		t.Fatal(err)
	}
	d.waitOut(t, "answered: 1) staging")
	d.waitOut(t, "Result: deployed to staging")
	d.send(t, "thanks")
	d.waitOut(t, "assistant: ok")
	if err := d.finish(t); err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, d.errOut.String())
	}
	msgs, _ := rt.History(context.Background(), id)
	if countUser(msgs, "thanks") != 1 {
		t.Errorf("after the other client's answer the next line should be a message; history: %+v", msgs)
	}
}

func TestParseChoiceAnswer(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    int // -1: dismissal
		wantErr bool
	}{
		{"1", 0, false}, {" 3 ", 2, false}, {"", -1, false}, {"d", -1, false}, {"D", -1, false},
		{"0", 0, true}, {"4", 0, true}, {"-1", 0, true}, {"two", 0, true}, {"1.5", 0, true}, {"99999999999999999999", 0, true},
	} {
		got, err := parseChoiceAnswer(tt.in, 3)
		switch {
		case tt.wantErr:
			if err == nil || !strings.Contains(err.Error(), "from 1 to 3") {
				t.Errorf("%q: err = %v, want one saying to type 1 to 3", tt.in, err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case tt.want < 0 && got != nil, tt.want >= 0 && (got == nil || *got != tt.want):
			t.Errorf("%q = %v, want %d", tt.in, got, tt.want)
		}
	}
}

// The picker, the authorization link and the answer render once each,
// with control characters neutralised; a child's own closing is left to
// its parent.
func TestTranscriptInteractEvents(t *testing.T) {
	var b bytes.Buffer
	tr := newTranscript(&b, Display{})
	ev := func(typ, data string) { tr.event(Event{Type: typ, Data: json.RawMessage(data)}) }
	ev("user_choice", `{"call_id":"c1","name":"deploy","prompt":"Where?\nPick one.","choices":["staging","prod\u001b[2J"],"default":1}`)
	ev("user_choice", `{"call_id":"c1","name":"deploy","prompt":"Where?","choices":["staging","prod"],"default":1}`) // replayed
	ev("user_choice", `{"call_id":"c2","name":"bad","prompt":"?","choices":[],"default":0}`)                         // no choices: ignored
	ev("choice_answered", `{"call_id":"c1","selected":0,"dismissed":false}`)
	ev("choice_answered", `{"call_id":"zz","selected":1,"dismissed":true}`)
	ev("oauth", `{"call_id":"c3","name":"login","auth_url":"https://a.example/x?s=1"}`)
	ev("oauth", `{"call_id":"c3","name":"login","auth_url":"https://a.example/x?s=1"}`) // replayed
	ev("view", `{"view_type":"progress","content":{"pct":5,"nested":{"a":1},"list":[1,2],"label":"half"}}`)
	ev("view", `{"view_type":"stats","content":{"n":5,"nested":{"a":1},"list":[1,2],"label":"half"}}`)
	ev("thread_spawned", `{"thread_id":"0123456789abcdef","parent_id":"p","origin_call_id":"c4","origin_tool":"spawn_thread","reason":"spawn_thread"}`)
	ev("thread_closed", `{"thread_id":"0123456789abcdef"}`)
	want := "  ? deploy asks: Where?\n" +
		"      Pick one.\n" +
		"      1) staging\n" +
		"      2) prod\uFFFD[2J  (default)\n" +
		"    Answer with a number from 1 to 2; d or an empty line dismisses the question (the tool then gets 2).\n" +
		"  · deploy's question answered: 1) staging\n" +
		"  · the question of call zz was dismissed; the tool gets its default, choice 2\n" +
		"  🔐 login needs your authorization; its call waits until you grant it.\n" +
		"     Authorize at: https://a.example/x?s=1\n" +
		"  · progress [█░░░░░░░░░░░░░░░░░░░░░░░]   5% half\n" +
		"  · view stats: label: \"half\", list: [2 items], n: 5, nested: {1 members}\n" +
		"  · child thread 89abcdef started (spawn thread)\n" +
		"  · thread 89abcdef closed\n"
	if b.String() != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", b.String(), want)
	}

	// A followed child: prefixed lines, inputs shortened, its own closing
	// and the session's toolsets not repeated.
	b.Reset()
	c := tr.forChild("0123456789abcdef")
	cev := func(typ, data string) { c.event(Event{Type: typ, Data: json.RawMessage(data)}) }
	cev("toolsets", `{"loaded":["x"],"errors":[]}`)
	cev("message", `{"thread_id":"0123456789abcdef","seq":4,"role":"user","text":"[runtime] `+strings.Repeat("long ", 60)+`"}`)
	cev("message", `{"thread_id":"0123456789abcdef","seq":4,"role":"user","text":"again"}`) // seen seq
	cev("message", `{"thread_id":"0123456789abcdef","seq":5,"role":"assistant","text":"done"}`)
	cev("thread_closed", `{"thread_id":"0123456789abcdef"}`)
	got := b.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "  [89abcdef] » [runtime] long long") || !strings.HasSuffix(lines[0], "…") ||
		lines[1] != "  [89abcdef] assistant: done" {
		t.Errorf("child transcript:\n%s", got)
	}
}

func TestPrintThreadTree(t *testing.T) {
	threads := []api.Thread{
		{ID: "R1", Status: api.ThreadStatusActive, Title: "Plan the trip"},
		{ID: "A", ParentID: "R1", Status: api.ThreadStatusClosed, OriginTool: "watch", OriginCallID: "c1"},
		{ID: "B", ParentID: "R1", Status: api.ThreadStatusActive, OriginTool: "spawn_thread", OriginCallID: "c2"},
		{ID: "B1", ParentID: "B", Status: api.ThreadStatusActive, OriginTool: "spawn_thread", OriginCallID: "c3"},
		{ID: "R2", Status: api.ThreadStatusClosed},
		{ID: "O", ParentID: "gone", Status: api.ThreadStatusActive, OriginTool: "watch"}, // its parent is not listed
	}
	var b bytes.Buffer
	if err := printThreadTree(&b, threads, "", "B1"); err != nil {
		t.Fatal(err)
	}
	want := "R1  active  session \"Plan the trip\"\n" +
		"├─ A  closed  event of watch (call c1)\n" +
		"└─ B  active  spawn_thread (call c2)\n" +
		"   └─ B1  active  spawn_thread (call c3)  ← this chat\n" +
		"R2  closed  session\n" +
		"O  active  event of watch\n"
	if b.String() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := printThreadTree(&b, threads, "B1", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "R1  active  session \"Plan the trip\"\n") || strings.Contains(b.String(), "R2") {
		t.Errorf("the tree of B1's session:\n%s", b.String())
	}
	b.Reset()
	if err := printThreadTree(&b, nil, "", ""); err != nil || !strings.Contains(b.String(), "no threads yet") {
		t.Errorf("empty tree: %q, %v", b.String(), err)
	}

	// A deep chain stops at maxTreeDepth levels.
	var chain []api.Thread
	for i := 0; i <= maxTreeDepth+5; i++ {
		th := api.Thread{ID: fmt.Sprintf("t%d", i), Status: api.ThreadStatusActive}
		if i > 0 {
			th.ParentID = fmt.Sprintf("t%d", i-1)
		}
		chain = append(chain, th)
	}
	b.Reset()
	if err := printThreadTree(&b, chain, "", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "… 1 child thread deeper than 64 levels not shown") || strings.Contains(b.String(), fmt.Sprintf("t%d ", maxTreeDepth+2)) {
		t.Errorf("deep tree not cut:\n%s", b.String())
	}
	// With a second child where the tree is cut, the count says so.
	chain = append(chain, api.Thread{ID: "sibling", ParentID: fmt.Sprintf("t%d", maxTreeDepth), Status: api.ThreadStatusActive})
	b.Reset()
	if err := printThreadTree(&b, chain, "", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "… 2 child threads deeper than 64 levels not shown") {
		t.Errorf("deep tree with two children at the cut:\n%s", b.String())
	}
}

func TestPrefixWriter(t *testing.T) {
	var b bytes.Buffer
	p := &prefixWriter{w: &b, prefix: "> "}
	fmt.Fprint(p, "a\nb")
	fmt.Fprint(p, "c\n\nd\n")
	if want := "> a\n> bc\n> \n> d\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// An answer the runtime refuses keeps the question open (502: the tool
// did not take it, answer again); one for a question no longer open
// (404) drops it. Each says so on stderr.
func TestAnswerChoiceRefused(t *testing.T) {
	for _, tt := range []struct {
		status   int
		msg      string
		wantOpen bool
		wantErr  string
	}{
		{http.StatusBadGateway, "the tool did not accept the answer", true, "answer not delivered"},
		{http.StatusNotFound, "no choice is waiting for call c1", false, "is no longer open"},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			var got []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
				if r.Method != http.MethodPost || r.URL.Path != "/v1/threads/th/choices/c1" {
					http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				json.NewEncoder(w).Encode(map[string]string{"error": tt.msg})
			}))
			defer srv.Close()
			api, _ := NewHTTPAPI(srv.URL, "")
			var errOut bytes.Buffer
			var mu sync.Mutex
			f := newFollower(context.Background(), api, &mu, &errOut)
			f.asks.note("th", Event{Type: "user_choice", Data: json.RawMessage(`{"call_id":"c1","name":"deploy","prompt":"?","choices":["a","b"],"default":0}`)})
			c, _ := f.asks.next()
			s := &session{opts: Options{Wait: time.Second, Stderr: &errOut}, api: api, f: f, tr: newTranscript(io.Discard, Display{})}
			s.answerChoice(context.Background(), c, "2")
			if string(got) != `{"selected":1,"dismiss":false}` {
				t.Errorf("body = %s, want {\"selected\":1,\"dismiss\":false}", got)
			}
			if _, open := f.asks.next(); open != tt.wantOpen {
				t.Errorf("question open = %v, want %v", open, tt.wantOpen)
			}
			if !strings.Contains(errOut.String(), tt.wantErr) || !strings.Contains(errOut.String(), tt.msg) {
				t.Errorf("stderr = %q, want %q and the server's message", errOut.String(), tt.wantErr)
			}
		})
	}
}
