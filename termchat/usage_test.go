package termchat

import (
	"context"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/api"
)

// usageModel is a model that reports the same token usage for every
// completion, as a real provider reports its own (the scripted model
// reports none).
type usageModel struct {
	model.Provider
	u model.Usage
}

func (m *usageModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	resp, err := m.Provider.Complete(ctx, req, s)
	if resp != nil {
		resp.Usage = m.u
	}
	return resp, err
}

// chatUsage is what every completion of withUsage costs.
var chatUsage = model.Usage{InputTokens: 12345, CachedInputTokens: 10000, CacheWriteInputTokens: 500, OutputTokens: 1234}

func withUsage(m model.Provider) model.Provider { return &usageModel{Provider: m, u: chatUsage} }

// oneCompletion is the line --status prints for one completion of
// withUsage.
const oneCompletion = "  · tokens: 12,345 in (10,000 cached, 500 written to the cache), 1,234 out\n"

func TestTokenCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 12345: "12,345", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := tokenCount(n); got != want {
			t.Errorf("tokenCount(%d) = %q; want %q", n, got, want)
		}
	}
	if got, want := tokensText(api.Usage{InputTokens: 40, OutputTokens: 2}), "40 in, 2 out"; got != want {
		t.Errorf("a usage without cache reads %q; want %q", got, want)
	}
}

// /usage prints the thread's and the session's totals, as the runtime
// saved them; by default a turn's output says nothing of its tokens.
func TestChatUsageCommand(t *testing.T) {
	rt := startTestRuntime(t, withUsage(timeScript()))
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "/usage\nhello\n/usage\nagain\n/usage\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out,
		"  · tokens of this thread: none reported\n  · tokens of the session (this thread alone): none reported\n  · (the model reports no token usage, or no turn ran yet)\n",
		"assistant: You said: hello\n  · tokens of this thread: 12,345 in (10,000 cached, 500 written to the cache), 1,234 out\n"+
			"  · tokens of the session (this thread alone): 12,345 in (10,000 cached, 500 written to the cache), 1,234 out\n",
		"assistant: You said: again\n  · tokens of this thread: 24,690 in (20,000 cached, 1,000 written to the cache), 2,468 out\n",
	)
	if strings.Contains(out, "· tokens:") {
		t.Errorf("without --status a turn's tokens are printed; output:\n%s", out)
	}
}

// With --status, each completion's tokens (its usage event) follow its
// turn, before the thread goes idle, in piped and interactive chats.
func TestChatStatusShowsEachCompletionsTokens(t *testing.T) {
	rt := startTestRuntime(t, withUsage(timeScript()))
	out, errOut, err := runChatFor(t, Options{Server: rt.URL, ShowStatus: true}, "hello\nagain\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	if n := strings.Count(out, oneCompletion); n != 2 {
		t.Errorf("piped: %d lines of a completion's tokens, want 2 (one a turn); output:\n%s", n, out)
	}
	wantLines(t, out, "assistant: You said: hello\n"+oneCompletion+"  · idle\n", "assistant: You said: again\n"+oneCompletion+"  · idle\n")

	d := startChat(t, Options{Server: rt.URL, ShowStatus: true}, true)
	d.send(t, "interactive")
	d.waitOut(t, "assistant: You said: interactive\n"+oneCompletion)
	if err := d.finish(t); err != nil {
		t.Fatalf("interactive chat: %v\nstderr: %s", err, d.errOut.String())
	}
}

// A child thread's completions count for the session: /usage on the root
// gives the session's total, and on the child its own and its root's
// session, as GET /v1/threads/{id} reports them. With --status, the
// tokens of the turn that answers a child's report follow the reply, not
// the report.
func TestChatUsageOfASession(t *testing.T) {
	tools := startInteractTools(t)
	rt := startTestRuntime(t, withUsage(interactScript()), tools.URL)
	d := startChat(t, Options{Server: rt.URL, ShowStatus: true}, false)
	d.send(t, "watch the news")
	d.waitOut(t, "assistant: Watching.")
	tools.fire <- `{"headline":"news"}`
	d.waitOut(t, "assistant: A child handled the news.")
	d.send(t, "/usage")
	d.waitOut(t, "tokens of the session")
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
	info, err := rt.ThreadInfo(context.Background(), root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Usage == nil || info.SessionUsage == nil || info.SessionUsage.InputTokens <= info.Usage.InputTokens {
		t.Fatalf("the runtime reports thread %+v, session %+v; want the child's completions in the session's", info.Usage, info.SessionUsage)
	}
	wantLines(t, d.out.String(),
		"assistant: A child handled the news.\n"+oneCompletion,
		"  · tokens of this thread: "+tokensText(*info.Usage)+"\n",
		"  · tokens of the session (this thread and its child threads): "+tokensText(*info.SessionUsage)+"\n")

	childInfo, err := rt.ThreadInfo(context.Background(), child.ID)
	if err != nil || childInfo.Usage == nil {
		t.Fatalf("the child's state: %+v, %v", childInfo, err)
	}
	out, errOut, err := runChatFor(t, Options{Server: rt.URL, Thread: child.ID}, "/usage\n")
	if err != nil {
		t.Fatalf("chat on the child: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out,
		"  · tokens of this thread: "+tokensText(*childInfo.Usage)+"\n",
		"  · tokens of the session (root thread "+shortID(root.ID)+" and its child threads): "+tokensText(*info.SessionUsage)+"\n")
}
