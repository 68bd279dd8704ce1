package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
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
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		srv.Close()
	})
	return srv.URL
}

// startTestRuntime runs a runtime playing turns against toolServers.
func startTestRuntime(t testing.TB, m model.Provider, toolServers ...string) *testRuntime {
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
	rt, err := runtime.New(runtime.Config{
		Store: st, Model: m, ToolServers: toolServers, PublicURL: srv.URL, Secret: secret,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		DisplayText: displayText,
	})
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

func runChatFor(t *testing.T, opts chatOptions, input string) (stdout, stderr string, err error) {
	t.Helper()
	if opts.wait == 0 {
		opts.wait = 30 * time.Second
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = chat(ctx, opts, strings.NewReader(input), false, &out, &errOut)
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
	out, errOut, err := runChatFor(t, chatOptions{server: rt.URL}, "What time is it in Tokyo?\n")
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
	out2, errOut2, err := runChatFor(t, chatOptions{server: rt.URL, thread: id}, "hello again\n")
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

func countUser(msgs []store.Message, text string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == store.RoleUser && m.Text == text {
			n++
		}
	}
	return n
}

// "/quit" ends the chat; lines after it are not sent.
func TestChatQuit(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, chatOptions{server: rt.URL}, "first\n/quit\nsecond\n")
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	wantLines(t, out, "you: first", "assistant: You said: first")
	if strings.Contains(out, "second") {
		t.Errorf("a line after /quit was sent:\n%s", out)
	}
}

// A model failure is shown; the message is kept (RAP RT-4) and the chat
// goes on with the next line, which retries it.
func TestChatModelFailure(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, chatOptions{server: rt.URL, wait: 20 * time.Second}, "please fail\n")
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	wantLines(t, out, "! error: ", "the model is down")
	if !strings.Contains(errOut, "stays queued") {
		t.Errorf("stderr should say the message is kept: %q", errOut)
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
	_, _, err := runChatFor(t, chatOptions{server: rt.URL, thread: "no-such-thread"}, "")
	if err == nil || !strings.Contains(err.Error(), "no-such-thread") || !strings.Contains(err.Error(), "Not Found") {
		t.Errorf("unknown thread: err = %v", err)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	_, _, err = runChatFor(t, chatOptions{server: deadURL}, "hi\n")
	if err == nil || !strings.Contains(err.Error(), "rap serve") {
		t.Errorf("server down: err = %v, want a hint to start 'rap serve'", err)
	}

	_, _, err = runChatFor(t, chatOptions{server: "localhost:8080"}, "")
	if !errors.Is(err, errUsage) {
		t.Errorf("malformed server URL: err = %v, want a usage error", err)
	}
}

// A message the runtime refuses is reported and nothing already accepted
// is lost: the chat continues and the earlier message stays in the history.
func TestChatRefusedMessageKeepsEarlier(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	big := strings.Repeat("x", runtime.MaxMessageBytes+10)
	out, errOut, err := runChatFor(t, chatOptions{server: rt.URL}, "first\n"+big+"\nthird\n")
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
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
	_, _, err := runChatFor(t, chatOptions{server: protected.URL}, "hi\n")
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") || !strings.Contains(err.Error(), "RAP_TOKEN") {
		t.Errorf("without token: err = %v", err)
	}
	out, errOut, err := runChatFor(t, chatOptions{server: protected.URL, token: "s3cret"}, "hi\n")
	if err != nil {
		t.Fatalf("with token: %v\n%s", err, errOut)
	}
	wantLines(t, out, "You said: hi")
}

func TestReadSSE(t *testing.T) {
	in := ": connected\n\n" +
		"event: text_delta\ndata: {\"text\":\"a\"}\n\n" +
		"event: message\ndata: {\"role\":\n" + "data: \"user\"}\n\n" +
		": keep-alive\n\n" +
		"data: {\"type\":\"status\",\"thread_id\":\"t\",\"data\":{\"state\":\"idle\"}}\n\n"
	var got []sseEvent
	err := readSSE(strings.NewReader(in), func(e sseEvent) bool { got = append(got, e); return true })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("end of stream: err = %v, want io.ErrUnexpectedEOF", err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d events: %+v", len(got), got)
	}
	if got[0].Type != "text_delta" || string(got[0].Data) != `{"text":"a"}` {
		t.Errorf("event 0 = %+v", got[0])
	}
	if got[1].Type != "message" || string(got[1].Data) != "{\"role\":\n\"user\"}" {
		t.Errorf("multi-line data = %q", got[1].Data)
	}
	if got[2].Type != "status" || string(got[2].Data) != `{"state":"idle"}` {
		t.Errorf("wrapped event = %+v", got[2])
	}
}

// RAP RE-3: a client renders the first display_as segment of a type it
// supports (text, diff, image), skips unknown ones, and falls back to the
// text; results are shortened without splitting a character, and a result
// already shown is not shown again.
func TestTranscriptResults(t *testing.T) {
	var b bytes.Buffer
	tr := newTranscript(&b)
	tr.maxResultLines, tr.maxResultChars = 3, 40
	unknown := rap.DisplaySegment{Type: "hologram", Content: json.RawMessage(`{"x":1}`)}
	tr.toolResult(store.ToolResult{CallID: "1", Name: "edit", Text: "model text",
		DisplayAs: []rap.DisplaySegment{unknown, rap.DiffSegment("a.go", "@@ -1 +1 @@\n-a\n+b\n"), rap.TextSegment("for people")}})
	tr.toolResult(store.ToolResult{CallID: "1", Name: "edit", Text: "duplicate"})
	tr.toolResult(store.ToolResult{CallID: "2", Name: "long", Text: "l1\nl2\nl3\nl4\nl5"})
	tr.toolResult(store.ToolResult{CallID: "3", Name: "wide", Text: strings.Repeat("é", 50), IsError: true})
	tr.toolResult(store.ToolResult{CallID: "4", Name: "img", Content: []rap.ContentItem{rap.TextContent("see"), rap.ImageContent("AAAA", "image/png")}})
	tr.toolResult(store.ToolResult{CallID: "5", Name: "odd", Text: "plain fallback", DisplayAs: []rap.DisplaySegment{unknown}})
	tr.toolResult(store.ToolResult{CallID: "6", Name: "shot", Text: "a screenshot", DisplayAs: []rap.DisplaySegment{rap.ImageSegment("QUJD", "image/webp"), rap.TextSegment("later")}})
	tr.toolResult(store.ToolResult{CallID: "7", Name: "say", Text: "model", DisplayAs: []rap.DisplaySegment{rap.TextSegment("for people")}})
	tr.toolResult(store.ToolResult{CallID: "8", Name: "esc", Text: "red \x1b[31malert\x1b[0m\r"})
	out := b.String()
	wantLines(t, out,
		"← edit: diff a.go\n      @@ -1 +1 @@\n      -a\n      +b\n", // the diff: its path and patch lines
		"← long: l1\n      l2\n      l3 … (shortened)",
		"← wide (error): ",
		"← img: see\n      [image image/png]",
		"← odd: plain fallback",        // only an unknown segment: the text
		"← shot: [image image/webp]\n", // the image segment, never its bytes
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
	msgs := []store.Message{
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "a", Name: "x"}, {ID: "b", Name: "y"}}},
		{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: "a"}}},
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
	tr := newTranscript(&b)
	tr.stream = true
	ev := func(typ, data string) { tr.event(sseEvent{Type: typ, Data: json.RawMessage(data)}) }
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
