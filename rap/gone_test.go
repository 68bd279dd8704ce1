package rap_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// rawEvent is the part of a subscription_event body these tests read,
// decoded from the bytes on the wire.
type rawEvent struct {
	Type       string `json:"type"`
	ToolCallID string `json:"tool_call_id"`
	Text       string `json:"text"`
	EventID    string `json:"event_id"`
}

func eventsOf(reqs []recorded) []rawEvent {
	var out []rawEvent
	for _, r := range reqs {
		var e rawEvent
		if json.Unmarshal(r.body, &e) == nil && e.Type == string(rap.TypeSubscriptionEvent) {
			out = append(out, e)
		}
	}
	return out
}

// A runtime answers 410 Gone to an event of a subscription
// it has ended (its /cancel_tool_call was lost, say). The SDK stops the
// subscription, with ErrSubscriptionGone as its context's cause, and
// forgets it, so it is not resumed at the next start. RAP SU-4.
func TestSubscriptionGoneStopsAndForgets(t *testing.T) {
	for _, withStore := range []bool{false, true} {
		name := "memory"
		if withStore {
			name = "durable"
		}
		t.Run(name, func(t *testing.T) {
			rt := newRecordingRuntime(t, func(_ *http.Request, body []byte) int {
				var e rawEvent
				_ = json.Unmarshal(body, &e)
				if e.Type == string(rap.TypeSubscriptionEvent) {
					return http.StatusGone
				}
				return http.StatusOK
			})
			var st rap.SubscriptionStore
			opts := &rap.ServerOptions{}
			if withStore {
				ds := sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
				opts.Store, st = ds, ds
			}
			causes := make(chan error, 1)
			srv, hs := newSDKServer(t, opts, func(s *rap.Server) {
				rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."},
					func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
						if err := sub.Emit(ctx, `{"n":1}`); err != nil {
							return err
						}
						<-ctx.Done()
						causes <- context.Cause(ctx)
						return nil
					})
			})
			if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("watch", "sub_g", "thread_g", rt.srv.URL+"/cb", nil)); status != 200 {
				t.Fatal("subscription refused")
			}
			select {
			case cause := <-causes:
				if !errors.Is(cause, rap.ErrSubscriptionGone) {
					t.Fatalf("cause %v, want rap.ErrSubscriptionGone", cause)
				}
			case <-time.After(sdkWait):
				t.Fatal("the subscription was not stopped after its event got 410 Gone")
			}
			if st != nil {
				sdkPoll(t, "the record to be deleted", func() bool { return len(sdkStored(t, st)) == 0 })
			}
			if n := len(eventsOf(rt.all())); n != 1 {
				t.Errorf("the runtime got %d events, want 1: a 410 is final and nothing follows it", n)
			}
			if dl, _ := srv.DeadLetters(context.Background(), 10); len(dl) != 0 {
				t.Errorf("the gone subscription's event was dead-lettered: %+v", dl)
			}
		})
	}
}

// Every event carries an event_id fixed when it is
// queued: the same on every retry, different between events.
func TestEventIDStableAcrossRetries(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // Idempotency-Key → attempts
	rt := newRecordingRuntime(t, func(r *http.Request, _ []byte) int {
		mu.Lock()
		defer mu.Unlock()
		k := r.Header.Get(rap.IdempotencyKeyHeader)
		seen[k]++
		if seen[k] == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."},
			func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
				if err := sub.Emit(ctx, "one"); err != nil {
					return err
				}
				return sub.Final(ctx, "two", false)
			})
	})
	sdkPost(t, hs.URL, sdkInvocation("watch", "sub_e", "thread_e", rt.srv.URL+"/cb", nil))
	sdkPoll(t, "both events delivered after a retry", func() bool { return len(eventsOf(rt.all())) == 4 })
	ids := map[string]map[string]bool{}
	for _, e := range eventsOf(rt.all()) {
		if ids[e.Text] == nil {
			ids[e.Text] = map[string]bool{}
		}
		ids[e.Text][e.EventID] = true
	}
	if len(ids["one"]) != 1 || len(ids["two"]) != 1 {
		t.Fatalf("event ids per event %v; want one id per event, the same on its retry", ids)
	}
	for one := range ids["one"] {
		if one == "" || ids["two"][one] {
			t.Errorf("event ids %v; want non-empty and different between events", ids)
		}
	}
}

// An event queued in a durable store keeps its event_id
// when a restarted server delivers it.
func TestEventIDSurvivesRestart(t *testing.T) {
	var mu sync.Mutex
	up := false
	rt := newRecordingRuntime(t, func(_ *http.Request, body []byte) int {
		mu.Lock()
		defer mu.Unlock()
		var e rawEvent
		_ = json.Unmarshal(body, &e)
		if e.Type == string(rap.TypeSubscriptionEvent) && !up {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	path := filepath.Join(t.TempDir(), "tool.db")
	setup := func(s *rap.Server) {
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."},
			func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
				if !sub.Resumed() {
					if err := sub.Emit(ctx, "queued"); err != nil {
						return err
					}
				}
				<-ctx.Done()
				return ctx.Err()
			})
	}
	st1, err := durable.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s1 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st1, Logger: sdkQuiet(), Retry: sdkFastRetry})
	setup(s1)
	if err := s1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs1 := newSDKHTTP(t, s1)
	sdkPost(t, hs1.URL, sdkInvocation("watch", "sub_p", "thread_p", rt.srv.URL+"/cb", nil))
	sdkPoll(t, "a refused attempt of the event", func() bool { return len(eventsOf(rt.all())) >= 1 })
	first := eventsOf(rt.all())[0].EventID
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_ = s1.Shutdown(ctx) // the event stays in the outbox
	cancel()
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	up = true
	mu.Unlock()
	st2 := sdkStore(t, path)
	s2 := rap.NewServer("sdk_test", &rap.ServerOptions{Store: st2, Logger: sdkQuiet(), Retry: sdkFastRetry})
	setup(s2)
	if err := s2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
		defer cancel()
		_ = s2.Shutdown(ctx)
	})
	var delivered []rawEvent
	sdkPoll(t, "the event delivered by the restarted server", func() bool {
		delivered = nil
		for _, r := range rt.all() {
			if r.status == http.StatusOK {
				delivered = append(delivered, eventsOf([]recorded{r})...)
			}
		}
		return len(delivered) == 1
	})
	if first == "" || delivered[0].EventID != first {
		t.Errorf("event_id %q after the restart, %q before; want the same non-empty id", delivered[0].EventID, first)
	}
}
