package rap_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// sdkStore opens a SQLite store in path and closes it when the test ends
// (after the servers registered later have shut down).
func sdkStore(t *testing.T, path string) *durable.Store {
	t.Helper()
	st, err := durable.Open(path)
	if err != nil {
		t.Fatalf("durable.Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// sdkStored lists the stored subscription ids.
func sdkStored(t *testing.T, st rap.SubscriptionStore) map[string]rap.SubscriptionRecord {
	t.Helper()
	recs, err := st.ListSubscriptions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]rap.SubscriptionRecord{}
	for _, r := range recs {
		out[r.Invocation.ID] = r
	}
	return out
}

// sdkPoll waits until cond holds.
func sdkPoll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(sdkWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", sdkWait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sdkEvents(msgs []rap.Callback) []*rap.SubscriptionEvent {
	var out []*rap.SubscriptionEvent
	for _, m := range msgs {
		if e, ok := m.(*rap.SubscriptionEvent); ok {
			out = append(out, e)
		}
	}
	return out
}

type watchIn struct {
	Repo string `json:"repo"`
}

// RAP SU-1, SU-2, SU-4: the subscription is stored durably, confirmed by a
// result with subscription: true naming its id, then emits threaded and
// associative events and a final one, after which nothing can be emitted
// and the record is gone.
func TestSubscriptionLifecycle(t *testing.T) {
	st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
	sink := newSDKSink(t)
	proceed := make(chan struct{})
	afterFinal := make(chan error, 1)
	_, hs := newSDKServer(t, &rap.ServerOptions{Store: st}, func(s *rap.Server) {
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches a repo."},
			func(ctx context.Context, sub *rap.Subscription, in watchIn) error {
				if sub.Resumed() || sub.Invocation().Operation != "watch" || in.Repo != "acme/api" {
					return errors.New("unexpected subscription state")
				}
				<-proceed
				if err := sub.Emit(ctx, `{"event":"push"}`); err != nil {
					return err
				}
				if err := sub.EmitAssociative(ctx, "line 1"); err != nil {
					return err
				}
				if err := sub.Final(ctx, `{"event":"closed"}`, true); err != nil {
					return err
				}
				afterFinal <- sub.Emit(ctx, "too late")
				return nil
			})
	})
	body := `{"operation":"watch","arguments":{"repo":"acme/api"},"id":"sub_1","call_id":"m_1","group_id":"thread_s","callback_url":"` + sink.URL() + `"}`
	if status, msg, _ := sdkPost(t, hs.URL, []byte(body)); status != 200 {
		t.Fatalf("answered %d %q", status, msg)
	}
	res := sink.result("sub_1")
	if !res.Subscription || !strings.Contains(res.Text, "sub_1") || res.CallID != "m_1" || res.GroupID != "thread_s" {
		t.Fatalf("confirmation %+v; want subscription: true naming sub_1 with the ids echoed (RAP SU-1, RE-1)", res)
	}
	if rec, ok := sdkStored(t, st)["sub_1"]; !ok || rec.Invocation.CallbackURL != sink.URL() || rec.Invocation.GroupID != "thread_s" {
		t.Fatalf("record not stored durably with callback_url and group_id: %+v", rec)
	}
	close(proceed)
	msgs := sink.waitFor("sub_1", "three events", func(m []rap.Callback) bool { return len(sdkEvents(m)) >= 3 })
	evs := sdkEvents(msgs)
	want := []rap.SubscriptionEvent{
		{GroupID: "thread_s", ToolCallID: "sub_1", Text: `{"event":"push"}`},
		{GroupID: "thread_s", ToolCallID: "sub_1", Text: "line 1", Associative: true},
		{GroupID: "thread_s", ToolCallID: "sub_1", Text: `{"event":"closed"}`, Associative: true, Final: true},
	}
	for i := range want {
		got := *evs[i]
		got.EventID = "" // random; TestEventIDStable checks it
		if got != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, *evs[i], want[i])
		}
	}
	if err := <-afterFinal; err == nil || !strings.Contains(err.Error(), "final") {
		t.Errorf("Emit after Final returned %v, want an error about the final event", err)
	}
	sdkPoll(t, "the record to be deleted", func() bool { _, ok := sdkStored(t, st)["sub_1"]; return !ok })
	time.Sleep(50 * time.Millisecond)
	if got := sink.forID("sub_1"); len(got) != 4 {
		t.Errorf("%d messages, want the result and 3 events and nothing after the final one: %s", len(got), sdkDescribe(got))
	}
}

// RAP SU-4, SU-7, CA-1, TC-2: /cancel_tool_call and /close_thread end a
// subscription: its context is cancelled with the matching cause, its
// record is deleted, and nothing more is sent, not even a final event.
func TestSubscriptionCancelledByRuntime(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		cause            error
	}{
		{"cancel_tool_call", "/cancel_tool_call", `{"thread_id":"thread_x","tool_call_id":"sub_x"}`, rap.ErrCallCancelled},
		{"close_thread", "/close_thread", `{"thread_id":"thread_x"}`, rap.ErrThreadClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
			sink := newSDKSink(t)
			type outcome struct{ cause, emitErr error }
			ended := make(chan outcome, 1)
			_, hs := newSDKServer(t, &rap.ServerOptions{Store: st}, func(s *rap.Server) {
				rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."},
					func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
						if err := sub.Emit(ctx, `{"n":1}`); err != nil {
							return err
						}
						<-ctx.Done()
						ended <- outcome{context.Cause(ctx), sub.Emit(context.Background(), `{"n":2}`)}
						return ctx.Err()
					})
			})
			if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("watch", "sub_x", "thread_x", sink.URL(), nil)); status != 200 {
				t.Fatal("refused")
			}
			sink.waitFor("sub_x", "the first event", func(m []rap.Callback) bool { return len(sdkEvents(m)) == 1 })
			if status, body, _ := sdkPost(t, hs.URL+tc.path, []byte(tc.body)); status != 200 || body != "" {
				t.Fatalf("%s answered %d %q", tc.path, status, body)
			}
			var o outcome
			select {
			case o = <-ended:
			case <-time.After(sdkWait):
				t.Fatal("the subscription's context was not cancelled")
			}
			if !errors.Is(o.cause, tc.cause) {
				t.Errorf("cause %v, want %v", o.cause, tc.cause)
			}
			if o.emitErr == nil {
				t.Error("Emit after cancellation succeeded (RAP SU-4: nothing after a cancel)")
			}
			sdkPoll(t, "the record to be deleted", func() bool { return len(sdkStored(t, st)) == 0 })
			time.Sleep(100 * time.Millisecond)
			if evs := sdkEvents(sink.forID("sub_x")); len(evs) != 1 {
				t.Errorf("%d events after cancellation, want only the first: %s", len(evs), sdkDescribe(sink.forID("sub_x")))
			}
		})
	}
}

// The resume hook: after a shutdown the record stays in the SQLite store,
// and a new server on the same file calls the handler again with
// Resumed() true and the saved state; its events still reach the runtime.
func TestSubscriptionResumesAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	sink := newSDKSink(t)
	type run struct {
		resumed bool
		state   string
		repo    string
	}
	runs := make(chan run, 2)
	setup := func(s *rap.Server) {
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."},
			func(ctx context.Context, sub *rap.Subscription, in watchIn) error {
				runs <- run{sub.Resumed(), string(sub.State()), in.Repo}
				if !sub.Resumed() {
					if err := sub.SaveState(ctx, json.RawMessage(`{"cursor":7}`)); err != nil {
						return err
					}
					<-ctx.Done() // until Shutdown
					return ctx.Err()
				}
				return sub.Final(ctx, `{"resumed_from":`+string(sub.State())+`}`, false)
			})
	}
	st1, err := durable.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s1 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st1, Logger: sdkQuiet(), Retry: sdkFastRetry})
	setup(s1)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs1 := newSDKHTTP(t, s1)
	if status, _, _ := sdkPost(t, hs1.URL, sdkInvocation("watch", "sub_r", "thread_r", sink.URL(), map[string]any{"repo": "acme/api"})); status != 200 {
		t.Fatal("refused")
	}
	if r := <-runs; r.resumed || r.repo != "acme/api" {
		t.Fatalf("first run %+v", r)
	}
	sink.result("sub_r")
	sdkPoll(t, "the saved state", func() bool { return string(sdkStored(t, st1)["sub_r"].State) == `{"cursor":7}` })
	if err := s1.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, ok := sdkStored(t, st1)["sub_r"]; !ok {
		t.Fatal("Shutdown deleted the subscription record; it must stay to be resumed")
	}
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := sdkStore(t, path)
	s2 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st2, Logger: sdkQuiet(), Retry: sdkFastRetry})
	setup(s2)
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s2.Shutdown(ctx) }()
	select {
	case r := <-runs:
		if !r.resumed || r.state != `{"cursor":7}` || r.repo != "acme/api" {
			t.Errorf("resumed run %+v, want Resumed with the saved state and the original arguments", r)
		}
	case <-time.After(sdkWait):
		t.Fatal("Start did not resume the stored subscription")
	}
	msgs := sink.waitFor("sub_r", "the final event", func(m []rap.Callback) bool { return len(sdkEvents(m)) == 1 })
	if ev := sdkEvents(msgs)[0]; !ev.Final || ev.Text != `{"resumed_from":{"cursor":7}}` || ev.GroupID != "thread_r" {
		t.Errorf("resumed event %+v", ev)
	}
	sdkPoll(t, "the record to be deleted", func() bool { return len(sdkStored(t, st2)) == 0 })
	if n := len(sink.forID("sub_r")); n != 2 {
		t.Errorf("%d messages, want the one confirmation and the one event (no second result after the restart)", n)
	}
}

// newSDKHTTP serves h over loopback until the test ends.
func newSDKHTTP(t *testing.T, h *rap.Server) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}

// When the handler returns on its own without Final, the server sends a
// final event so the runtime stops tracking it: a plain one after success,
// an "Error: " one after a failure. Invalid arguments get an error result
// and store nothing.
func TestSubscriptionHandlerReturnEndsIt(t *testing.T) {
	st := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{Store: st}, func(s *rap.Server) {
		rap.AddSubscription(s, &rap.Tool{Name: "once", Description: "Ends."},
			func(ctx context.Context, sub *rap.Subscription, in struct {
				Fail bool `json:"fail"`
			}) error {
				if in.Fail {
					return errors.New("the feed went away")
				}
				return nil
			})
	})
	for _, tc := range []struct {
		id   string
		fail bool
		want string
	}{{"ok", false, `"status":"ended"`}, {"bad", true, "the feed went away"}} {
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("once", tc.id, "t", sink.URL(), map[string]any{"fail": tc.fail})); status != 200 {
			t.Fatal("refused")
		}
		msgs := sink.waitFor(tc.id, "a final event", func(m []rap.Callback) bool { return len(sdkEvents(m)) == 1 })
		ev := sdkEvents(msgs)[0]
		if !ev.Final || !strings.Contains(ev.Text, tc.want) {
			t.Errorf("%s: event %+v, want final containing %q", tc.id, ev, tc.want)
		}
		if tc.fail && !strings.HasPrefix(ev.Text, "Error: ") {
			t.Errorf("%s: failure event %q does not start with \"Error: \"", tc.id, ev.Text)
		}
	}
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("once", "invalid", "t", sink.URL(), map[string]any{"fail": "yes"})); status != 200 {
		t.Fatal("refused")
	}
	if res := sink.result("invalid"); res.Subscription || !strings.HasPrefix(res.Text, "Error: ") {
		t.Errorf("invalid arguments gave %+v, want an Error result without subscription", res)
	}
	sdkPoll(t, "no stored subscriptions", func() bool { return len(sdkStored(t, st)) == 0 })
}

// RAP TS-10: a stored subscription whose arguments no longer fit the
// tool's schema after an upgrade is ended visibly at Start with a final
// "Error: " event, and forgotten.
func TestResumeWithChangedSchemaEndsSubscription(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	sink := newSDKSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()

	st1, err := durable.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s1 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st1, Logger: sdkQuiet(), Retry: sdkFastRetry})
	rap.AddSubscription(s1, &rap.Tool{Name: "watch", Description: "v1"},
		func(ctx context.Context, sub *rap.Subscription, in watchIn) error { <-ctx.Done(); return ctx.Err() })
	if err := s1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs1 := newSDKHTTP(t, s1)
	sdkPost(t, hs1.URL, sdkInvocation("watch", "sub_v", "thread_v", sink.URL(), map[string]any{"repo": "acme/api"}))
	sink.result("sub_v")
	if err := s1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = st1.Close()

	st2 := sdkStore(t, path)
	s2 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st2, Logger: sdkQuiet(), Retry: sdkFastRetry})
	ran := make(chan struct{}, 1)
	rap.AddSubscription(s2, &rap.Tool{Name: "watch", Description: "v2"},
		func(ctx context.Context, sub *rap.Subscription, in struct {
			Owner string `json:"owner"`
		}) error {
			ran <- struct{}{}
			return nil
		})
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s2.Shutdown(ctx) }()
	msgs := sink.waitFor("sub_v", "a final event", func(m []rap.Callback) bool { return len(sdkEvents(m)) == 1 })
	ev := sdkEvents(msgs)[0]
	if !ev.Final || !strings.HasPrefix(ev.Text, "Error: ") || !strings.Contains(ev.Text, "Subscribe again") {
		t.Errorf("event %+v, want a final Error event that says to subscribe again", ev)
	}
	if len(sdkStored(t, st2)) != 0 {
		t.Error("the unresumable record is still stored")
	}
	select {
	case <-ran:
		t.Error("the handler ran with arguments that do not fit its schema")
	default:
	}
}

// Start reports a store it cannot read, and can be called again; after
// Shutdown it refuses.
func TestStartErrors(t *testing.T) {
	st, err := durable.Open(filepath.Join(t.TempDir(), "tool.db"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close() // every query fails now
	s := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st, Logger: sdkQuiet()})
	addEcho(s)
	err = s.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listing stored subscriptions") {
		t.Fatalf("Start with a closed store returned %v, want an error naming the subscription listing", err)
	}
	if err2 := s.Start(context.Background()); err2 == nil || strings.Contains(err2.Error(), "twice") {
		t.Errorf("second Start after a failed one returned %v, want the store error again", err2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown of a server that never started: %v", err)
	}
	if err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "after Shutdown") {
		t.Errorf("Start after Shutdown returned %v", err)
	}
}
