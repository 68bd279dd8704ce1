package rap_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

type setupIn struct {
	Mode string `json:"mode"`
}

// addSetupSub adds "setup", a subscription tool that confirms in its
// handler. By mode: "ok" confirms, emits once and waits; "emit" emits
// without calling Confirm; "fail" returns an error before confirming;
// "panic" panics before confirming; "nil" returns nil at once; "wait"
// waits for cancellation before confirming; "state" saves state, then
// confirms.
func addSetupSub(s *rap.Server, started chan<- string) {
	rap.AddSubscription(s, &rap.Tool{Name: "setup", Description: "Sets up, then confirms."},
		func(ctx context.Context, sub *rap.Subscription, in setupIn) error {
			if started != nil {
				started <- in.Mode
			}
			switch in.Mode {
			case "fail":
				return errors.New("the directory cannot be watched; give another path")
			case "panic":
				panic("setup exploded with secret internals")
			case "nil":
				return nil
			case "wait":
				<-ctx.Done()
				return context.Cause(ctx)
			case "state":
				if err := sub.SaveState(ctx, []byte(`{"cursor":1}`)); err != nil {
					return err
				}
			}
			if in.Mode != "emit" {
				if err := sub.Confirm(ctx); err != nil {
					return err
				}
				if err := sub.Confirm(ctx); err != nil { // a second call does nothing
					return err
				}
			}
			if err := sub.Emit(ctx, `{"ready":true}`); err != nil {
				return err
			}
			<-ctx.Done()
			return context.Cause(ctx)
		}, rap.ConfirmInHandler())
}

// RAP SU-1, IN-4, RE-4: with ConfirmInHandler, the confirmation is sent
// (and the record stored) only when the handler confirms, before its
// first event; a setup failure, a panic or a cancellation before the
// confirmation ends the call in one ordinary "Error: " tool_result, with
// no event and nothing stored.
func TestConfirmInHandler(t *testing.T) {
	st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
	sink := newSDKSink(t)
	started := make(chan string, 16)
	_, hs := newSDKServer(t, &rap.ServerOptions{Store: st}, func(s *rap.Server) { addSetupSub(s, started) })

	for _, mode := range []string{"ok", "emit", "state"} {
		id := "sub_" + mode
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", id, "thread_c", sink.URL(), map[string]any{"mode": mode})); status != 200 {
			t.Fatalf("%s: refused", mode)
		}
		msgs := sink.waitFor(id, "confirmation and event", func(m []rap.Callback) bool { return len(m) >= 2 })
		res, ok := msgs[0].(*rap.ToolResult)
		if !ok || !res.Subscription || !strings.Contains(res.Text, id) {
			t.Fatalf("%s: first message %s, want the confirming tool_result naming %s (RAP SU-1)", mode, sdkDescribe(msgs), id)
		}
		if ev, ok := msgs[1].(*rap.SubscriptionEvent); !ok || ev.Text != `{"ready":true}` || ev.Final {
			t.Fatalf("%s: second message %s, want the event", mode, sdkDescribe(msgs))
		}
		rec, stored := sdkStored(t, st)[id]
		if !stored || rec.Invocation.CallbackURL != sink.URL() {
			t.Fatalf("%s: record not stored after the confirmation: %+v", mode, rec)
		}
		if mode == "state" && string(rec.State) != `{"cursor":1}` {
			t.Errorf("state saved before Confirm was not stored with the record: %q", rec.State)
		}
	}

	for _, tc := range []struct{ mode, want string }{
		{"fail", "the directory cannot be watched; give another path"},
		{"panic", "internal failure"},
	} {
		id := "sub_" + tc.mode
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", id, "thread_c", sink.URL(), map[string]any{"mode": tc.mode})); status != 200 {
			t.Fatalf("%s: refused", tc.mode)
		}
		res := sink.result(id)
		if res.Subscription || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, tc.want) {
			t.Errorf("%s: result %+v, want an Error result without subscription containing %q", tc.mode, res, tc.want)
		}
		if strings.Contains(res.Text, "secret internals") || strings.Contains(res.Text, "goroutine") {
			t.Errorf("%s: result leaks internals: %q (RAP RE-4)", tc.mode, res.Text)
		}
		if _, stored := sdkStored(t, st)[id]; stored {
			t.Errorf("%s: a subscription that never started is stored and would resume", tc.mode)
		}
	}

	// Returning nil without confirming: confirmed, then ended at once.
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", "sub_nil", "thread_c", sink.URL(), map[string]any{"mode": "nil"})); status != 200 {
		t.Fatal("refused")
	}
	msgs := sink.waitFor("sub_nil", "confirmation and final event", func(m []rap.Callback) bool { return len(m) >= 2 })
	if res, ok := msgs[0].(*rap.ToolResult); !ok || !res.Subscription {
		t.Errorf("nil: first message %s, want the confirmation", sdkDescribe(msgs))
	}
	if ev, ok := msgs[1].(*rap.SubscriptionEvent); !ok || !ev.Final {
		t.Errorf("nil: second message %s, want a final event", sdkDescribe(msgs))
	}

	// Cancelled during setup: an error result that says so, nothing stored.
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", "sub_wait", "thread_c", sink.URL(), map[string]any{"mode": "wait"})); status != 200 {
		t.Fatal("refused")
	}
	for m := range started {
		if m == "wait" {
			break
		}
	}
	if status, _, _ := sdkPost(t, hs.URL+"/cancel_tool_call", []byte(`{"thread_id":"thread_c","tool_call_id":"sub_wait"}`)); status != 200 {
		t.Fatal("cancel refused")
	}
	if res := sink.result("sub_wait"); res.Subscription || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "cancelled") {
		t.Errorf("cancelled during setup: %+v, want an Error result saying it was cancelled", res)
	}
	if _, stored := sdkStored(t, st)["sub_wait"]; stored {
		t.Error("a subscription cancelled during setup is stored")
	}
	time.Sleep(50 * time.Millisecond)
	for _, id := range []string{"sub_fail", "sub_panic", "sub_wait"} {
		if got := sink.forID(id); len(got) != 1 {
			t.Errorf("%s: %d messages, want exactly one tool_result (RAP IN-4): %s", id, len(got), sdkDescribe(got))
		}
	}
}

// RAP IN-4: a subscription still setting up when the server shuts down
// ends in an error result (delivered from the outbox) and is not resumed
// by the next Start, since it was never confirmed.
func TestConfirmInHandlerShutdownDuringSetup(t *testing.T) {
	st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
	sink := newSDKSink(t)
	started := make(chan string, 4)
	s := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st, Logger: sdkQuiet(), Retry: sdkFastRetry})
	addSetupSub(s, started)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := newSDKHTTP(t, s)
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", "sub_sd", "thread_sd", sink.URL(), map[string]any{"mode": "wait"})); status != 200 {
		t.Fatal("refused")
	}
	<-started
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	res := sink.result("sub_sd")
	if res.Subscription || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "shut down") {
		t.Errorf("result %+v, want an Error result saying the server shut down", res)
	}
	if n := len(sdkStored(t, st)); n != 0 {
		t.Errorf("%d subscriptions stored; one that never confirmed must not resume", n)
	}
}

// ServerOptions.MaxSubscriptions bounds the running subscriptions: a call
// over the limit ends in an "Error: " result that says what to do (RAP
// RE-4, IN-4), and a slot is free again once a subscription ends.
func TestMaxSubscriptions(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{MaxSubscriptions: 2}, func(s *rap.Server) { addSetupSub(s, nil) })
	for _, id := range []string{"s1", "s2", "s3"} {
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", id, "thread_m", sink.URL(), map[string]any{"mode": "ok"})); status != 200 {
			t.Fatalf("%s: refused", id)
		}
		res := sink.result(id)
		if over := id == "s3"; over != strings.HasPrefix(res.Text, "Error: ") || over == res.Subscription {
			t.Fatalf("%s: result %+v; want the first two confirmed and the third an Error result", id, res)
		}
		if id == "s3" && (!strings.Contains(res.Text, "limit of 2 subscriptions") || !strings.Contains(res.Text, "Cancel a subscription")) {
			t.Errorf("over-limit result %q does not name the limit and what to do", res.Text)
		}
	}
	if status, _, _ := sdkPost(t, hs.URL+"/cancel_tool_call", []byte(`{"thread_id":"thread_m","tool_call_id":"s1"}`)); status != 200 {
		t.Fatal("cancel refused")
	}
	// The slot frees once s1's handler has returned: retry until then.
	deadline := time.Now().Add(sdkWait)
	for i := 0; ; i++ {
		id := "s4_" + string(rune('a'+i%26)) + time.Now().Format("150405.000000")
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", id, "thread_m", sink.URL(), map[string]any{"mode": "ok"})); status != 200 {
			t.Fatal("refused")
		}
		if res := sink.result(id); res.Subscription {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no subscription slot came free after a cancellation")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RAP IN-4: with a Store, the result of a handler that outlives
// Shutdown's deadline still goes into the outbox, and the next Start on
// the same store delivers it.
func TestResultAfterShutdownDeadlineIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	st := sdkStore(t, path)
	sink := newSDKSink(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s1 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st, Logger: sdkQuiet(), Retry: sdkFastRetry})
	rap.AddTool(s1, &rap.Tool{Name: "stubborn", Description: "Ignores cancellation."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			started <- struct{}{}
			<-release
			return rap.Text("late but kept"), nil
		})
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := newSDKHTTP(t, s1)
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("stubborn", "late_1", "thread_l", sink.URL(), map[string]any{})); status != 200 {
		t.Fatal("refused")
	}
	<-started
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err := s1.Shutdown(short)
	cancelShort()
	if err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Shutdown returned %v, want an error saying an invocation was still running", err)
	}
	close(release)
	sdkPoll(t, "the late result in the outbox", func() bool {
		msgs, err := st.Pending(ctx, 10)
		return err == nil && len(msgs) == 1
	})

	s2 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st, Logger: sdkQuiet(), Retry: sdkFastRetry})
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s2.Shutdown(ctx) }()
	if res := sink.result("late_1"); res.Text != "late but kept" {
		t.Errorf("result %+v, want the late handler's result", res)
	}
}

// panicky is an argument type whose decoding panics.
type panicky struct{}

func (*panicky) UnmarshalJSON([]byte) error { panic("decoder bug") }

// A stored subscription whose arguments make the decoder panic does not
// crash Start (which would crash every restart): it is ended with a
// final "Error: " event and forgotten (RAP IN-4, SU-4).
func TestResumeSurvivesPanickingDecoder(t *testing.T) {
	st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
	sink := newSDKSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	rec := rap.SubscriptionRecord{Created: time.Now().UTC(), Invocation: rap.Invocation{
		Operation: "boom", Arguments: []byte(`{}`), ID: "sub_p", GroupID: "thread_p", CallbackURL: sink.URL(),
	}}
	if err := st.SaveSubscription(ctx, rec); err != nil {
		t.Fatal(err)
	}
	s := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st, Logger: sdkQuiet(), Retry: sdkFastRetry})
	rap.AddSubscription(s, &rap.Tool{Name: "boom", Description: "d", InputSchema: rap.EmptyObjectSchema},
		func(context.Context, *rap.Subscription, panicky) error { return nil })
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown(ctx) }()
	msgs := sink.waitFor("sub_p", "a final event", func(m []rap.Callback) bool { return len(sdkEvents(m)) == 1 })
	if ev := sdkEvents(msgs)[0]; !ev.Final || !strings.HasPrefix(ev.Text, "Error: ") || strings.Contains(ev.Text, "decoder bug") {
		t.Errorf("event %+v, want a final Error event without internals", ev)
	}
	sdkPoll(t, "the record to be deleted", func() bool { return len(sdkStored(t, st)) == 0 })
}

// failingSubs is a durable store whose subscription writes fail.
type failingSubs struct{ *durable.Store }

func (failingSubs) SaveSubscription(context.Context, rap.SubscriptionRecord) error {
	return errors.New("disk full")
}

// RAP SU-1, IN-4: when the subscription cannot be stored, no confirmation
// is sent: the call ends in one "Error: " result that says to try again,
// whether the server confirms or the handler does.
func TestSubscriptionStoreFailure(t *testing.T) {
	st := failingSubs{sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))}
	sink := newSDKSink(t)
	ran := make(chan struct{}, 1)
	_, hs := newSDKServer(t, &rap.ServerOptions{Store: st}, func(s *rap.Server) {
		rap.AddSubscription(s, &rap.Tool{Name: "plain", Description: "d"},
			func(ctx context.Context, sub *rap.Subscription, _ struct{}) error { ran <- struct{}{}; return nil })
		addSetupSub(s, nil)
	})
	for _, tc := range []struct {
		op, id string
		args   map[string]any
	}{{"plain", "f_plain", map[string]any{}}, {"setup", "f_setup", map[string]any{"mode": "ok"}}} {
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation(tc.op, tc.id, "thread_f", sink.URL(), tc.args)); status != 200 {
			t.Fatalf("%s: refused", tc.id)
		}
		res := sink.result(tc.id)
		if res.Subscription || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "failed to store the subscription") || !strings.Contains(res.Text, "Try again") {
			t.Errorf("%s: result %+v, want an Error result about storing that says to try again", tc.id, res)
		}
		if strings.Contains(res.Text, "disk full") {
			t.Errorf("%s: result %q shows the store's internals (RAP RE-4)", tc.id, res.Text)
		}
	}
	time.Sleep(50 * time.Millisecond)
	for _, id := range []string{"f_plain", "f_setup"} {
		if got := sink.forID(id); len(got) != 1 {
			t.Errorf("%s: %d messages, want only the error result: %s", id, len(got), sdkDescribe(got))
		}
	}
	select {
	case <-ran:
		t.Error("the handler ran although its subscription could not be stored")
	default:
	}
}

// RAP IN-4: a ConfirmInHandler handler that returns nil without
// confirming, on a server whose store fails, still ends its call in one
// error result.
func TestConfirmInHandlerNilReturnStoreFailure(t *testing.T) {
	st := failingSubs{sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))}
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{Store: st}, func(s *rap.Server) { addSetupSub(s, nil) })
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("setup", "n_fail", "thread_n", sink.URL(), map[string]any{"mode": "nil"})); status != 200 {
		t.Fatal("refused")
	}
	if res := sink.result("n_fail"); res.Subscription || !strings.HasPrefix(res.Text, "Error: ") {
		t.Errorf("result %+v, want an Error result", res)
	}
	time.Sleep(50 * time.Millisecond)
	if got := sink.forID("n_fail"); len(got) != 1 {
		t.Errorf("%d messages, want only the error result: %s", len(got), sdkDescribe(got))
	}
}
