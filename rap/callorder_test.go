package rap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// callbackCall names the call a callback body belongs to: a result's id,
// an event's tool_call_id.
func callbackCall(t *testing.T, r *http.Request) (id string, head map[string]any) {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("reading a callback: %v", err)
		return "", nil
	}
	if err := json.Unmarshal(b, &head); err != nil {
		t.Errorf("callback body %q: %v", b, err)
		return "", nil
	}
	if id, _ := head["id"].(string); id != "" {
		return id, head
	}
	id, _ = head["tool_call_id"].(string)
	return id, head
}

// startSDKServer starts a Server without a Store, with the echo tool and
// fast retries, behind an httptest server.
func startSDKServer(t *testing.T) (*rap.Server, string) {
	t.Helper()
	s := rap.NewServer("sdk_test", &rap.ServerOptions{Logger: sdkQuiet(), Retry: sdkFastRetry})
	addEcho(s)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s, hs.URL
}

// RAP TR-6: a callback answered 5xx is retried with backoff. With every
// call naming the same callback URL, a call whose callback keeps failing
// is retried on its own: another call's result, of another thread or of
// the same one, is delivered while the first is still being retried, and
// the first keeps being retried after.
func TestFailingCallDoesNotHoldOtherCallsOnOneURL(t *testing.T) {
	for name, threads := range map[string][2]string{"other thread": {"tA", "tB"}, "same thread": {"t", "t"}} {
		t.Run(name, func(t *testing.T) {
			var attemptsA atomic.Int64
			delivered := make(chan string, 16)
			cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id, _ := callbackCall(t, r)
				if id == "A" {
					attemptsA.Add(1)
					http.Error(w, "not now", http.StatusInternalServerError)
					return
				}
				delivered <- id
			}))
			t.Cleanup(cb.Close)
			_, url := startSDKServer(t)
			one := cb.URL + "/callback"

			if status, body, _ := sdkPost(t, url, sdkInvocation("echo", "A", threads[0], one, map[string]any{"text": "a"})); status != http.StatusOK {
				t.Fatalf("invocation A answered %d %q", status, body)
			}
			sdkPoll(t, "call A's result being retried", func() bool { return attemptsA.Load() >= 2 })
			if status, body, _ := sdkPost(t, url, sdkInvocation("echo", "B", threads[1], one, map[string]any{"text": "b"})); status != http.StatusOK {
				t.Fatalf("invocation B answered %d %q", status, body)
			}
			select {
			case id := <-delivered:
				if id != "B" {
					t.Fatalf("delivered %q, want B", id)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("call B's result was not delivered while call A's was retried (%d attempts)", attemptsA.Load())
			}
			n := attemptsA.Load()
			sdkPoll(t, "call A's result still being retried after B's was delivered", func() bool { return attemptsA.Load() > n })
		})
	}
}

// RAP TR-6: a callback answered 4xx is not retried. It is dead-lettered
// after its one attempt, and other threads' calls to the same URL are
// delivered.
func TestRefusedCallbackIsNotRetried(t *testing.T) {
	var attemptsA atomic.Int64
	var deliveredB atomic.Bool
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch id, _ := callbackCall(t, r); id {
		case "A":
			attemptsA.Add(1)
			http.Error(w, "unknown call", http.StatusBadRequest)
		case "B":
			deliveredB.Store(true)
		}
	}))
	t.Cleanup(cb.Close)
	s, url := startSDKServer(t)
	one := cb.URL + "/callback"
	for _, id := range []string{"A", "B"} {
		if status, body, _ := sdkPost(t, url, sdkInvocation("echo", id, "t"+id, one, map[string]any{"text": id})); status != http.StatusOK {
			t.Fatalf("invocation %s answered %d %q", id, status, body)
		}
	}
	var dead []rap.DeadLetter
	sdkPoll(t, "call A's refused result dead-lettered and B's delivered", func() bool {
		dead, _ = s.DeadLetters(context.Background(), 10)
		return len(dead) == 1 && deliveredB.Load()
	})
	if dead[0].Status != http.StatusBadRequest {
		t.Errorf("dead letter status %d, want 400", dead[0].Status)
	}
	if n := attemptsA.Load(); n != 1 {
		t.Errorf("the refused callback was attempted %d times; want 1 (a 4xx is not retried)", n)
	}
}

// A call's messages reach the runtime in the order they were sent (a
// subscription's events in order, its final result after them) while
// many calls send to one callback URL at once and some POSTs fail with
// 500 and are retried (RAP TR-6), with the in-memory outbox and the
// durable one.
func TestCallMessagesStayInOrderAcrossConcurrentCalls(t *testing.T) {
	const calls, events = 16, 12
	outboxes := map[string]func(t *testing.T) rap.Outbox{
		"memory": func(*testing.T) rap.Outbox { return rap.NewMemoryOutboxForTest() },
		"durable": func(t *testing.T) rap.Outbox {
			st, err := durable.Open(filepath.Join(t.TempDir(), "outbox.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
	for name, open := range outboxes {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			got := map[string][]string{}
			var posts atomic.Int64
			cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id, head := callbackCall(t, r)
				if posts.Add(1)%3 == 0 {
					http.Error(w, "try again", http.StatusInternalServerError)
					return
				}
				what := "result"
				if head["type"] == string(rap.TypeSubscriptionEvent) {
					what, _ = head["text"].(string)
				}
				mu.Lock()
				got[id] = append(got[id], what)
				mu.Unlock()
			}))
			t.Cleanup(cb.Close)

			s := rap.NewSender(rap.SenderOptions{Outbox: open(t), Retry: sdkFastRetry, Logger: sdkQuiet()})
			ctx, cancel := context.WithCancel(context.Background())
			run := make(chan error, 1)
			go func() { run <- s.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-run })

			one := cb.URL + "/callback"
			var wg sync.WaitGroup
			for c := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("call-%d", c)
					for e := range events {
						if err := s.Send(ctx, one, &rap.SubscriptionEvent{GroupID: "t", ToolCallID: id, Text: fmt.Sprint(e)}); err != nil {
							t.Error(err)
							return
						}
					}
					if err := s.Send(ctx, one, &rap.ToolResult{GroupID: "t", ID: id, Text: "done"}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			fctx, fcancel := context.WithTimeout(ctx, time.Minute)
			defer fcancel()
			if err := s.Flush(fctx); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for c := range calls {
				id := fmt.Sprintf("call-%d", c)
				want := make([]string, 0, events+1)
				for e := range events {
					want = append(want, fmt.Sprint(e))
				}
				want = append(want, "result")
				if fmt.Sprint(got[id]) != fmt.Sprint(want) {
					t.Errorf("%s received %v; want %v", id, got[id], want)
				}
			}
		})
	}
}
