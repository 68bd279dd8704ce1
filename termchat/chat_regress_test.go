package termchat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// Each test below reproduces a misbehaviour "rap chat" once had and fails
// with the chat from before its fix.

// In a terminal, the reply to an asynchronous tool's result was
// printed before that result (the runtime saves and announces a turn's
// inputs after the reply streamed). The result comes first.
func TestChatInteractiveResultBeforeReply(t *testing.T) {
	rt := startTestRuntime(t, timeScript(), startGettime(t, nil))
	d := startChat(t, Options{Server: rt.URL}, true)
	d.waitOut(t, "you> ")
	d.send(t, "What time is it in Tokyo?")
	d.waitOut(t, "Tokyo time: ")
	d.waitOut(t, "\nyou> ")
	out := d.out.String()
	iRes, iReply := strings.Index(out, "← get_time_in_zone: "), strings.Index(out, "Tokyo time: ")
	if iRes < 0 || iRes > iReply {
		t.Errorf("the reply is printed before the tool result that caused it:\n%s", out)
	}
	// The first turn, caused by the user's message alone, streams.
	wantLines(t, out, "assistant: Asking the clock.")
	if err := d.finish(t); err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, d.errOut.String())
	}
}

// Output that arrives while the prompt is shown (here a
// subscription event handled by a child thread) was printed after the
// prompt, on the user's input line. It goes above the prompt, which is
// shown again under it.
func TestChatNothingPrintedOverThePrompt(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, interactScript(), tools.URL)
	d := startChat(t, Options{Server: rt.URL}, true)
	d.waitOut(t, "you> ")
	d.send(t, "watch the news")
	d.waitOut(t, "assistant: Watching.")
	d.waitOut(t, "Watching.\nyou> ")
	tools.fire <- `{"headline":"LATE-NEWS"}`
	d.waitOut(t, "assistant: A child handled the news.")
	d.waitOut(t, "A child handled the news.\nyou> ")
	out := d.out.String()
	// Every prompt is followed by what the user typed (a line of its own)
	// or is cleared ("\r\x1b[K") before output is printed, never by output.
	for i := 0; ; {
		j := strings.Index(out[i:], "you> ")
		if j < 0 {
			break
		}
		rest := out[i+j+len("you> "):]
		switch {
		case rest == "", strings.HasPrefix(rest, "\n"), strings.HasPrefix(rest, "\r\x1b[K"):
		default:
			t.Errorf("output printed after the prompt: %q\nfull output:\n%q", oneLine(rest, 60), out)
		}
		i += j + len("you> ")
	}
	if !strings.Contains(out, "you> \r\x1b[K") || !strings.Contains(out, "LATE-NEWS") {
		t.Errorf("the event should be printed above a cleared prompt:\n%q", out)
	}
	if err := d.finish(t); err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, d.errOut.String())
	}
}

// tickTools serves "ticks", a subscription that sends n events to the
// subscribing thread, gap apart, then ends.
func tickTools(t *testing.T, n int, gap time.Duration) string {
	t.Helper()
	srv := rap.NewServer("ticks", &rap.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rap.AddSubscription(srv, &rap.Tool{Name: "ticks", Description: "ticks"}, func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
		for i := 1; i <= n; i++ {
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				return nil
			}
			text := fmt.Sprintf("tick %d", i)
			if i == n {
				return sub.Final(ctx, text, true)
			}
			if err := sub.EmitAssociative(ctx, text); err != nil {
				return err
			}
		}
		return nil
	})
	return serveToolServer(t, srv).URL
}

func tickScript() *scripted.Model {
	return scripted.New([]scripted.Turn{
		{AfterUser: "ticks", ToolCalls: []scripted.Call{{Name: "ticks", Arguments: json.RawMessage(`{}`)}}},
		{When: &scripted.When{LastResultContains: "Subscribed", LastInput: "tool_result"}, Text: "Watching."},
		{When: &scripted.When{LastResultContains: "tick", LastInput: "tool_result"}, Text: "Got {{last_result}}.", Repeat: true},
		{Text: "ok", Repeat: true},
	})
}

// A piped chat exited once the thread was idle while its
// subscription still produced events. It ends only when the
// subscription ended and every event was handled and shown.
func TestChatPipedWaitsForSubscription(t *testing.T) {
	const n = 5
	rt := startTestRuntime(t, tickScript(), tickTools(t, n, 150*time.Millisecond))
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "ticks please\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	// Every event is shown. The runtime answers events queued together in
	// one turn, so when ticks come faster than turns (a loaded machine)
	// the script's "Got {{last_result}}" names only the last of them: the
	// last tick is answered, not necessarily each.
	for i := 1; i <= n; i++ {
		wantLines(t, out, fmt.Sprintf("← event: tick %d\n", i))
	}
	wantLines(t, out, fmt.Sprintf("assistant: Got tick %d.", n))
	// And nothing was left for after the chat.
	threads, _ := rt.Threads(context.Background())
	msgs, _ := rt.History(context.Background(), threads[0].ID)
	if last := msgs[len(msgs)-1]; !strings.Contains(last.Text, fmt.Sprintf("Got tick %d", n)) {
		t.Errorf("the chat ended before the thread's last turn; last message %+v", last)
	}
}

// Keys a terminal without line editing sends as escape
// sequences (arrows: ESC [ D…) reached the model. They are removed from
// piped input; an interactive chat edits lines with a line editor.
func TestChatEscapeSequencesNeverReachTheModel(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "helo\x1b[D\x1b[Dl\x1b[C\x1b[C world\x1bOH\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	threads, _ := rt.Threads(context.Background())
	msgs, _ := rt.History(context.Background(), threads[0].ID)
	for _, m := range msgs {
		if strings.ContainsRune(m.Text, 0x1b) {
			t.Errorf("an escape sequence reached the history: %q", m.Text)
		}
	}
	wantLines(t, out, "you: helol world")
	var _ LineReader = (*LineEditor)(nil)
}

func TestStripEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain":               "plain",
		"a\x1b[Db":            "ab",
		"a\x1b[1;5Cb":         "ab",
		"\x1bOHhome\x1bOF":    "home",
		"esc at end\x1b":      "esc at end",
		"alt\x1bx":            "alt",
		"unfinished \x1b[12;": "unfinished ",
	} {
		if got := stripEscapes(in); got != want {
			t.Errorf("stripEscapes(%q) = %q, want %q", in, got, want)
		}
	}
}

// A chat whose messages the runtime refused with 401 (a token
// the server no longer accepts) exited 0. It stops at once and exits 1,
// saying what to do.
func TestChatUnauthorizedExitsNonZero(t *testing.T) {
	rt := startTestRuntime(t, timeScript())
	target, _ := url.Parse(rt.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	// A gateway that lets the chat read but refuses its messages.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"token expired"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	_, errOut, err := runChatFor(t, Options{Server: srv.URL}, "hello\nagain\n")
	if ExitCode(err) != ExitFailure {
		t.Fatalf("after a 401: err = %v, exit %d; want exit 1\nstderr: %s", err, ExitCode(err), errOut)
	}
	if !strings.Contains(err.Error(), "Unauthorized") || !strings.Contains(err.Error(), "RAP_TOKEN") {
		t.Errorf("the error should name the refusal and the fix: %v", err)
	}
}

// busyAPI is a runtime whose thread runs forever: a turn is never done.
type busyAPI struct{ posted chan string }

func (busyAPI) CreateThread(context.Context) (*Created, error) { return &Created{ID: "th"}, nil }
func (a busyAPI) PostMessage(_ context.Context, _, text string) error {
	a.posted <- text
	return nil
}
func (busyAPI) History(context.Context, string) ([]api.Message, error) { return nil, nil }
func (busyAPI) Events(ctx context.Context, _ string) (<-chan Event, func() error, error) {
	ch := make(chan Event, 2)
	ch <- Event{Type: "replay_done", Data: json.RawMessage(`{"mode":"replay"}`)}
	ch <- Event{Type: "status", Data: json.RawMessage(`{"state":"running"}`)}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, func() error { return nil }, nil
}
func (busyAPI) AnswerChoice(context.Context, string, string, *int) error { return nil }

func (busyAPI) AnswerInput(context.Context, string, string, map[string]json.RawMessage, bool) error {
	return nil
}
func (busyAPI) Status(context.Context, string) (*ThreadStatus, error) {
	return &ThreadStatus{Status: "active"}, nil
}
func (busyAPI) Threads(context.Context, string) ([]api.Thread, error) { return nil, nil }

// Ctrl-C interrupts the turn being waited for (the chat goes
// back to the prompt); Ctrl-C again ends the chat.
func TestChatCtrlCInterruptsThenExits(t *testing.T) {
	api := busyAPI{posted: make(chan string, 10)}
	ints := make(chan struct{}, 2)
	lines := &testLines{}
	d := startChatWith(t, Options{API: api, Interrupts: ints, Wait: time.Hour}, lines)
	d.waitOut(t, "you> ")
	d.send(t, "think hard")
	<-api.posted
	ints <- struct{}{}
	waitFor(t, func() bool { return strings.Contains(d.errOut.String(), "interrupted") }, "the interruption to be reported")
	waitFor(t, func() bool { return lines.count() == 2 }, "the prompt after the interruption")
	// The second Ctrl-C, at the prompt: the line editor reports it.
	d.in.CloseWithError(ErrInterrupted)
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the chat did not end after the second Ctrl-C")
	}
	if lines.count() != 2 {
		t.Errorf("%d prompts shown, want 2", lines.count())
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Display: diffs coloured on a terminal, images drawn with the
// terminal's protocol or linked, the default rendering of a call made
// readable.
func TestDisplay(t *testing.T) {
	d := Display{Color: true}
	got := d.colorDiff([]string{"diff a.go", "@@ -1 +1 @@", "-old", "+new", " same"})
	want := []string{ansiBold + "diff a.go" + ansiReset, ansiCyan + "@@ -1 +1 @@" + ansiReset, ansiRed + "-old" + ansiReset, ansiGreen + "+new" + ansiReset, " same"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("colorDiff = %q, want %q", got, want)
	}
	if got := (Display{}).colorDiff([]string{"+x"}); got[0] != "+x" {
		t.Errorf("no colour asked: %q", got)
	}
	if s := (Display{ImageProtocol: "iterm"}).drawImage([]byte("abc")); s != "\x1b]1337;File=inline=1;size=3;preserveAspectRatio=1:YWJj\a" {
		t.Errorf("iterm = %q", s)
	}
	if s := (Display{ImageProtocol: "kitty"}).drawImage([]byte("abc")); s != "\x1b_Ga=T,f=100,m=0;YWJj\x1b\\" {
		t.Errorf("kitty = %q", s)
	}
	env := map[string]string{"TERM_PROGRAM": "iTerm.app"}
	if d := DetectDisplay(func(k string) string { return env[k] }, true); !d.Color || d.ImageProtocol != "iterm" {
		t.Errorf("iTerm: %+v", d)
	}
	env = map[string]string{"TERM": "xterm-kitty", "NO_COLOR": "1"}
	if d := DetectDisplay(func(k string) string { return env[k] }, true); d.Color || d.ImageProtocol != "kitty" {
		t.Errorf("kitty with NO_COLOR: %+v", d)
	}
	if d := DetectDisplay(func(k string) string { return env[k] }, false); d != (Display{}) {
		t.Errorf("not a terminal: %+v", d)
	}

	var b syncBuffer
	tr := newTranscript(&b, Display{ImageProtocol: "iterm", ImageDir: t.TempDir()})
	tr.toolResult(runtimeResult("shot", rap.ImageSegment("YWJj", "image/png")))
	if out := b.String(); !strings.Contains(out, "← shot: [image image/png]\n      ↳ image/png, 3 bytes: file://") || !strings.Contains(out, "\x1b]1337;File=inline=1;size=3;") {
		t.Errorf("image: %q", out)
	}

	for args, want := range map[string]string{
		`{"thread_id":"t","report_to_parent":"{\"n\":1}"}`: `{"thread_id":"t","report_to_parent":{"n":1}}`,
		`{"b":1,"a":"x"}`:   `{"b":1,"a":"x"}`,
		`[1, 2]`:            `[1, 2]`,
		`{"s":"[not json"}`: `{"s":"[not json"}`,
	} {
		if got := argsText(json.RawMessage(args), 200); got != want {
			t.Errorf("argsText(%s) = %s, want %s", args, got, want)
		}
	}
	if !isDefaultDisplay(`close_thread({"a":1})`, "close_thread") || isDefaultDisplay("Time in Tokyo", "get_time") {
		t.Error("isDefaultDisplay")
	}
	if got := shortIDs("thread 01a209c9-2e22-703a-a3ea-bc809c9af29d closed"); got != "thread 9c9af29d closed" {
		t.Errorf("shortIDs = %q", got)
	}
}

func runtimeResult(name string, seg rap.DisplaySegment) (r api.ToolResult) {
	r.CallID, r.Name, r.Text, r.DisplayAs = "c-"+name, name, "for the model", []rap.DisplaySegment{seg}
	return r
}

// While a subscription delivers 50 events, a piped
// chat shows every one of them, in the order the runtime saved them, and
// ends only after the last one was answered; a second chat resuming the
// thread shows the same conversation in the same order.
func TestChatFiftySubscriptionEventsInOrder(t *testing.T) {
	const n = 50
	rt := startTestRuntime(t, tickScript(), tickTools(t, n, 10*time.Millisecond))
	out, errOut, err := runChatFor(t, Options{Server: rt.URL, Wait: time.Minute}, "ticks please\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	last := -1
	for i := 1; i <= n; i++ {
		j := strings.Index(out, fmt.Sprintf("← event: tick %d\n", i))
		if j < 0 || j < last {
			t.Fatalf("event %d missing or out of order:\n%s", i, out)
		}
		last = j
	}
	if k := strings.LastIndex(out, "assistant: Got tick "); k < last {
		t.Errorf("the chat ended before the reply to the last event:\n%s", out)
	}
	threads, _ := rt.Threads(context.Background())
	out2, errOut2, err := runChatFor(t, Options{Server: rt.URL, Thread: threads[0].ID}, "")
	if err != nil {
		t.Fatalf("resume: %v\nstderr: %s", err, errOut2)
	}
	// The same story: from "you: ticks please" to the end.
	story := func(s string) string { return s[strings.Index(s, "you: ticks please"):] }
	if story(out) != story(out2) {
		t.Errorf("the live chat and a chat resuming the thread show different stories:\nlive:\n%s\nresumed:\n%s", story(out), story(out2))
	}
}

// A stream that could not resume (a reset) replays the reply streamed so
// far: it is not printed twice, the whole reply is printed when saved.
func TestTranscriptResetMidReply(t *testing.T) {
	var b syncBuffer
	tr := newTranscript(&b, Display{})
	tr.stream = true
	ev := func(typ, data string) { tr.event(Event{Type: typ, Data: json.RawMessage(data)}) }
	ev("text_delta", `{"text":"Hello "}`)
	ev("reset", `{"reason":"restart"}`)
	ev("text_delta", `{"text":"Hello "}`) // the replay's text so far
	ev("replay_done", `{"mode":"reset"}`)
	ev("text_delta", `{"text":"world"}`)
	ev("message", `{"role":"assistant","text":"Hello world"}`)
	want := "assistant: Hello \n  · (the connection was lost; the reply is shown again when it is complete)\nassistant: Hello world\n"
	if b.String() != want {
		t.Errorf("transcript:\n%q\nwant:\n%q", b.String(), want)
	}
}
