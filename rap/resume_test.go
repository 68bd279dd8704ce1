package rap_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

type resumeArgs struct {
	Item string `json:"item"`
}

type resumeState struct {
	Step int `json:"step"`
}

// resumableTool adds "fetch": a first run saves step 1 and then waits for
// release (or, when release is nil, for its context); a resumed run
// answers with what it resumed from.
func resumableTool(s *rap.Server, release chan struct{}, saved chan<- struct{}) {
	rap.AddTool(s, &rap.Tool{Name: "fetch", Description: "Fetches."}, func(ctx context.Context, c *rap.Call, in resumeArgs) (*rap.Reply, error) {
		if c.Resumed() {
			var st resumeState
			if err := json.Unmarshal(c.State(), &st); err != nil {
				return nil, err
			}
			return rap.Text("resumed " + in.Item + " at step " + string(rune('0'+st.Step))), nil
		}
		if err := c.SaveState(ctx, resumeState{Step: 1}); err != nil {
			return nil, err
		}
		saved <- struct{}{}
		if release != nil {
			<-release // the process is as good as dead
		} else {
			<-ctx.Done()
		}
		return nil, context.Cause(ctx)
	})
}

// A call whose handler saved a state and whose process then stopped
// without storing a result (a crash) is run again by the next Start, with
// its arguments and the state; the runtime gets exactly one result, the
// resumed run's, and a later restart runs and sends nothing more.
func TestSavedCallResumesAfterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	st := sdkStore(t, path)
	sink := newSDKSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	saved := make(chan struct{}, 1)

	s1 := rap.NewServer("resume_test", &rap.ServerOptions{Store: st, Logger: sdkQuiet(), Retry: sdkFastRetry})
	resumableTool(s1, never, saved)
	if err := s1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs1 := newSDKHTTP(t, s1)
	if status, body, _ := sdkPost(t, hs1.URL, sdkInvocation("fetch", "call_r", "thread_r", sink.URL(), map[string]any{"item": "apples"})); status != 200 {
		t.Fatalf("refused: %d %s", status, body)
	}
	<-saved
	// The process dies: it stops serving, and its handler never returns.
	hs1.Close()
	sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_ = s1.Shutdown(sctx)
	scancel()

	s2, _ := newSDKServer(t, &rap.ServerOptions{Store: st}, func(s *rap.Server) { resumableTool(s, nil, saved) })
	if r := sink.result("call_r"); r.Text != "resumed apples at step 1" || r.GroupID != "thread_r" {
		t.Fatalf("resumed result %+v", r)
	}
	if err := s2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, err := st.UnfinishedCalls(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("journal after the resumed call: %+v, %v; want it empty", recs, err)
	}
	if n := len(sink.forID("call_r")); n != 1 {
		t.Errorf("call_r got %d messages, want 1: %s", n, sdkDescribe(sink.forID("call_r")))
	}
}

// Shutdown stops a call that saved a state without answering it; the next
// Start resumes it and the runtime gets its one result. A call that saved
// nothing is answered at Shutdown as before.
func TestSavedCallResumesAfterShutdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	st := sdkStore(t, path)
	sink := newSDKSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	saved := make(chan struct{}, 1)
	plainRunning := make(chan struct{}, 1)
	setup := func(s *rap.Server) {
		resumableTool(s, nil, saved)
		rap.AddTool(s, &rap.Tool{Name: "plain", Description: "Waits."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			plainRunning <- struct{}{}
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
	}
	s1, hs1 := newSDKServer(t, &rap.ServerOptions{Store: st}, setup)
	for _, inv := range [][]byte{
		sdkInvocation("fetch", "call_s", "thread_s", sink.URL(), map[string]any{"item": "pears"}),
		sdkInvocation("plain", "call_p", "thread_s", sink.URL(), nil),
	} {
		if status, body, _ := sdkPost(t, hs1.URL, inv); status != 200 {
			t.Fatalf("refused: %d %s", status, body)
		}
	}
	<-saved
	<-plainRunning
	if err := s1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Shutdown waited for the outbox: what was to be sent is sent.
	if msgs := sink.forID("call_s"); len(msgs) != 0 {
		t.Fatalf("the resumable call was answered at Shutdown: %s", sdkDescribe(msgs))
	}
	if r := sink.result("call_p"); !strings.Contains(r.Text, "shut down") {
		t.Fatalf("the plain call was answered with %+v, want the shutdown error", r)
	}
	newSDKServer(t, &rap.ServerOptions{Store: st}, setup)
	if r := sink.result("call_s"); r.Text != "resumed pears at step 1" {
		t.Fatalf("resumed result %+v", r)
	}
	if n := len(sink.forID("call_p")); n != 1 {
		t.Errorf("call_p got %d messages after the restart, want its 1", n)
	}
}

// SaveState does nothing without a Store: the call runs as usual.
func TestSaveStateWithoutStore(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "save", Description: "Saves."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			if err := c.SaveState(ctx, map[string]int{"n": 1}); err != nil {
				return nil, err
			}
			return rap.Text("ok"), nil
		})
	})
	sdkPost(t, hs.URL, sdkInvocation("save", "call_w", "thread_w", sink.URL(), nil))
	if r := sink.result("call_w"); r.Text != "ok" {
		t.Fatalf("result %+v", r)
	}
}

// Invoke runs a call synchronously on the server's workers, recorded in
// the call journal while it runs (without a callback URL); it refuses
// what it cannot run before running anything, and a full pool with
// ErrBusy.
func TestInvokeUsesPoolAndJournal(t *testing.T) {
	st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
	release := make(chan struct{})
	var running atomic.Int32
	s, _ := newSDKServer(t, &rap.ServerOptions{Store: st, Workers: 1, Queue: 1}, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "slow", Description: "Waits."}, func(ctx context.Context, c *rap.Call, in resumeArgs) (*rap.Reply, error) {
			running.Add(1)
			<-release
			if err := c.SaveState(ctx, 1); err != nil {
				return nil, err
			}
			return rap.Text("done " + in.Item), nil
		})
		rap.AddSubscription(s, &rap.Tool{Name: "ticks", Description: "Ticks."}, func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
			return nil
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	inv := func(op, id string, args string) *rap.Invocation {
		return &rap.Invocation{Operation: op, GroupID: "g", ID: id, Arguments: json.RawMessage(args)}
	}
	if _, err := s.Invoke(ctx, inv("nope", "1", "{}")); !errors.Is(err, rap.ErrUnknownOperation) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := s.Invoke(ctx, inv("ticks", "1", "{}")); !errors.Is(err, rap.ErrSubscriptionTool) {
		t.Errorf("subscription tool: %v", err)
	}
	var ae *rap.ArgumentsError
	if _, err := s.Invoke(ctx, inv("slow", "1", `{"item":7}`)); !errors.As(err, &ae) {
		t.Errorf("invalid arguments: %v", err)
	}
	// "a" takes the one worker, "b" the one queue slot.
	done := make(chan *rap.ToolResult, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			r, err := s.Invoke(ctx, inv("slow", id, `{"item":"`+id+`"}`))
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
	}
	deadline := time.Now().Add(sdkWait)
	for {
		recs, err := st.UnfinishedCalls(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if running.Load() == 1 && len(recs) == 2 {
			if recs[0].CallbackURL != "" || recs[1].CallbackURL != "" {
				t.Errorf("journal records %+v; want them without a callback URL", recs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited for both calls in the journal and one running: %d running, journal %+v", running.Load(), recs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := s.Invoke(ctx, inv("slow", "a", `{"item":"x"}`)); !errors.Is(err, rap.ErrCallRunning) {
		t.Errorf("the same call again: %v", err)
	}
	if _, err := s.Invoke(ctx, inv("slow", "c", `{"item":"x"}`)); !errors.Is(err, rap.ErrBusy) {
		t.Errorf("a third call with the worker and the queue taken: %v", err)
	}
	close(release)
	got := map[string]string{}
	for range 2 {
		r := <-done
		if r == nil {
			t.Fatal("no result")
		}
		got[r.ID] = r.Text
	}
	if got["a"] != "done a" || got["b"] != "done b" {
		t.Fatalf("results %v", got)
	}
	if recs, err := st.UnfinishedCalls(ctx); err != nil || len(recs) != 0 {
		t.Errorf("journal after the call: %+v, %v", recs, err)
	}
}

// Handle adds a route that ServeHTTP serves after its browser checks; RAP
// routes cannot be taken.
func TestHandleAddsRoutes(t *testing.T) {
	s, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "t", Description: "T."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			return rap.Text("t"), nil
		})
	})
	s.Handle("/extra", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("extra"))
	}))
	resp, err := http.Get(hs.URL + "/extra")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /extra: %d", resp.StatusCode)
	}
	resp, err = http.Post(hs.URL+"/extra", "text/plain", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form-like POST to /extra: %d, want 415 as for every route", resp.StatusCode)
	}
	defer func() {
		if recover() == nil {
			t.Error("Handle of a RAP route did not panic")
		}
	}()
	s.Handle(rap.InvokePath, http.NotFoundHandler())
}
