package rap_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// A call that was running when its tool server stopped without finishing
// it (a crash: no Shutdown) is answered once, by the next Start, with an
// error result that says so (RAP IN-4: the runtime gets a result for every
// acknowledged call and stops waiting). Calls that had finished, and a
// call that became a subscription, get nothing more; a second restart
// sends nothing again.
func TestInterruptedCallAnsweredAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	sink := newSDKSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	// The first process's build handler never returns while the test
	// runs, as if the process had died in it.
	never := make(chan struct{})
	setup := func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "quick", Description: "Answers at once."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			return rap.Text("quick done"), nil
		})
		rap.AddTool(s, &rap.Tool{Name: "build", Description: "Builds for a long time."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			<-never
			return rap.Text("built"), nil
		})
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."}, func(ctx context.Context, sub *rap.Subscription, in watchIn) error {
			if err := sub.Confirm(ctx); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		})
	}
	start := func(shutdownAtEnd bool) *rap.Server {
		s := rap.NewServer("journal_test", &rap.ServerOptions{Store: sdkStore(t, path), Logger: sdkQuiet(), Retry: sdkFastRetry})
		setup(s)
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if shutdownAtEnd {
			t.Cleanup(func() {
				sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer scancel()
				_ = s.Shutdown(sctx)
			})
		}
		return s
	}

	s1 := start(false) // shut down below, as it dies
	t.Cleanup(func() { close(never) })
	hs1 := newSDKHTTP(t, s1)
	for _, inv := range [][]byte{
		sdkInvocation("quick", "call_q", "thread_j", sink.URL(), map[string]any{}),
		sdkInvocation("build", "call_b", "thread_j", sink.URL(), map[string]any{}),
		sdkInvocation("watch", "call_w", "thread_j", sink.URL(), map[string]any{"repo": "acme/api"}),
	} {
		if status, body, _ := sdkPost(t, hs1.URL, inv); status != 200 {
			t.Fatalf("invocation refused: %d %s", status, body)
		}
	}
	if r := sink.result("call_q"); r.Text != "quick done" {
		t.Fatalf("quick: %+v", r)
	}
	if r := sink.result("call_w"); !r.Subscription {
		t.Fatalf("watch was not confirmed: %+v", r)
	}
	// The process dies: it stops serving and delivering while build runs.
	hs1.Close()
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if err := s1.Shutdown(sctx); err == nil {
		t.Fatal("Shutdown returned nil while a handler still ran")
	}
	scancel()

	s2 := start(false) // shut down below
	msgs := sink.waitFor("call_b", "the error result of the interrupted call", func(m []rap.Callback) bool { return len(m) > 0 })
	res, ok := msgs[0].(*rap.ToolResult)
	if !ok || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "stopped") || !strings.Contains(res.Text, `"build"`) ||
		res.GroupID != "thread_j" || res.ID != "call_b" {
		b, _ := json.Marshal(msgs[0])
		t.Fatalf("interrupted call answered with %s; want an Error: result naming the tool and saying the server stopped", b)
	}

	// A second restart answers nothing again.
	if err := s2.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	start(true)
	time.Sleep(200 * time.Millisecond) // what a redundant answer would need to arrive
	if n := len(sink.forID("call_b")); n != 1 {
		t.Errorf("call_b got %d messages, want exactly 1: %s", n, sdkDescribe(sink.forID("call_b")))
	}
	if n := len(sink.forID("call_q")); n != 1 {
		t.Errorf("call_q, which had finished, got %d messages, want 1: %s", n, sdkDescribe(sink.forID("call_q")))
	}
	for _, m := range sink.forID("call_w") {
		if r, ok := m.(*rap.ToolResult); ok && !r.Subscription {
			t.Errorf("the subscription got an extra tool result after the restart: %+v", r)
		}
	}
}

// An invocation is recorded in the journal while it runs, unless
// NoCallJournal is set.
func TestNoCallJournal(t *testing.T) {
	for _, off := range []bool{false, true} {
		st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
		sink := newSDKSink(t)
		release := make(chan struct{})
		_, hs := newSDKServer(t, &rap.ServerOptions{Store: st, NoCallJournal: off}, func(s *rap.Server) {
			rap.AddTool(s, &rap.Tool{Name: "build", Description: "Builds."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				<-release
				return rap.Text("built"), nil
			})
		})
		if status, body, _ := sdkPost(t, hs.URL, sdkInvocation("build", "call_n", "thread_n", sink.URL(), map[string]any{})); status != 200 {
			t.Fatalf("refused: %d %s", status, body)
		}
		recs, err := st.UnfinishedCalls(context.Background())
		want := 1
		if off {
			want = 0
		}
		if err != nil || len(recs) != want {
			t.Errorf("NoCallJournal %v: UnfinishedCalls = %+v, %v; want %d record(s)", off, recs, err, want)
		}
		close(release)
		if r := sink.result("call_n"); r.Text != "built" {
			t.Errorf("result %+v", r)
		}
		if recs, _ := st.UnfinishedCalls(context.Background()); len(recs) != 0 {
			t.Errorf("NoCallJournal %v: the finished call is still recorded: %+v", off, recs)
		}
	}
}
