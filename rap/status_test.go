package rap_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// gatedSink is a callback endpoint that answers 503 while down is set,
// so that results wait (in the worker, or in the outbox), and counts what
// it accepted.
type gatedSink struct {
	srv      *httptest.Server
	down     atomic.Bool
	accepted atomic.Int64
}

func newGatedSink(t *testing.T) *gatedSink {
	g := &gatedSink{}
	g.down.Store(true)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if g.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		g.accepted.Add(1)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// statusOf POSTs {thread_id, tool_call_id} to base/tool_call_status and
// returns the HTTP status and the decoded answer.
func statusOf(t *testing.T, base, thread, id string, header ...string) (int, rap.ToolCallStatus, string) {
	t.Helper()
	body, _ := json.Marshal(rap.ToolCallStatusRequest{ThreadID: thread, ToolCallID: id})
	code, text, _ := sdkPost(t, base+rap.ToolCallStatusPath, body, header...)
	var st rap.ToolCallStatus
	_ = json.Unmarshal([]byte(text), &st)
	return code, st, text
}

// waitStatus polls until the call's state is want.
func waitStatus(t *testing.T, base, thread, id string, want rap.CallState, header ...string) {
	t.Helper()
	wantCode := http.StatusOK
	if want == rap.CallUnknown {
		wantCode = http.StatusNotFound
	}
	sdkPoll(t, "tool_call_status of "+id+" to be "+string(want), func() bool {
		code, st, _ := statusOf(t, base, thread, id, header...)
		return code == wantCode && st.Status == want && st.ToolCallID == id
	})
}

// POST /tool_call_status answers running, delivering,
// subscribed, or 404 unknown, over HTTP, with the invocations'
// authentication, and validates its ids as /cancel_tool_call does.
func TestToolCallStatus(t *testing.T) {
	sink := newGatedSink(t)
	release := make(chan struct{})
	auth := []string{"Authorization", "Bearer s3cret"}
	_, hs := newSDKServer(t, &rap.ServerOptions{BearerToken: "s3cret"}, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "wait", Description: "Waits."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			<-release
			return rap.Text("done"), nil
		})
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."}, func(ctx context.Context, sub *rap.Subscription, in watchIn) error {
			<-ctx.Done()
			return ctx.Err()
		})
	})
	cb := sink.srv.URL + "/cb"
	for _, inv := range [][]byte{
		sdkInvocation("wait", "call_r", "thread_s", cb, nil),
		sdkInvocation("watch", "call_w", "thread_s", cb, map[string]any{"repo": "a/b"}),
	} {
		if code, body, _ := sdkPost(t, hs.URL, inv, auth...); code != http.StatusOK {
			t.Fatalf("invocation answered %d %s", code, body)
		}
	}
	waitStatus(t, hs.URL, "thread_s", "call_r", rap.CallRunning, auth...)
	waitStatus(t, hs.URL, "thread_s", "call_w", rap.CallSubscribed, auth...)

	// Unknown: 404 with the JSON body the runtime relies on.
	code, st, text := statusOf(t, hs.URL, "thread_s", "call_nope", auth...)
	if code != http.StatusNotFound || st != (rap.ToolCallStatus{ToolCallID: "call_nope", Status: rap.CallUnknown}) {
		t.Errorf("unknown call answered %d %s", code, text)
	}
	// The same id in another thread is another call.
	if code, _, text := statusOf(t, hs.URL, "thread_other", "call_r", auth...); code != http.StatusNotFound {
		t.Errorf("call_r in another thread answered %d %s", code, text)
	}
	// Authentication as for invocations (RAP CA-3).
	if code, _, _ := statusOf(t, hs.URL, "thread_s", "call_r"); code != http.StatusUnauthorized {
		t.Errorf("no token answered %d, want 401", code)
	}
	// Ids are validated as /cancel_tool_call validates them (RAP TC-2).
	for _, tc := range []struct{ name, body string }{
		{"not JSON", `{"thread_id":`},
		{"no tool_call_id", `{"thread_id":"thread_s"}`},
		{"path in id", `{"thread_id":"thread_s","tool_call_id":"../x"}`},
		{"control character", `{"thread_id":"thread_s\u0000","tool_call_id":"call_r"}`},
		{"duplicate key", `{"thread_id":"thread_s","tool_call_id":"call_r","tool_call_id":"call_w"}`},
	} {
		if code, body, _ := sdkPost(t, hs.URL+rap.ToolCallStatusPath, []byte(tc.body), auth...); code != http.StatusBadRequest {
			t.Errorf("%s: answered %d %s, want 400", tc.name, code, body)
		}
	}

	// The handler returns while the runtime is down: the worker holds the
	// result, retrying.
	close(release)
	waitStatus(t, hs.URL, "thread_s", "call_r", rap.CallDelivering, auth...)
	sink.down.Store(false)
	waitStatus(t, hs.URL, "thread_s", "call_r", rap.CallUnknown, auth...)
}

// Across a restart: a result the first process stored in
// its durable outbox is "delivering" for the second, and a stored
// subscription is "subscribed" once resumed.
func TestToolCallStatusAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	sink := newGatedSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	start := func() (*rap.Server, *httptest.Server) {
		s := rap.NewServer("status_test", &rap.ServerOptions{Store: sdkStore(t, path), Logger: sdkQuiet(), Retry: sdkFastRetry})
		rap.AddTool(s, &rap.Tool{Name: "quick", Description: "Answers at once."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			return rap.Text("quick done"), nil
		})
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."}, func(ctx context.Context, sub *rap.Subscription, in watchIn) error {
			if err := sub.Confirm(ctx); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		})
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return s, newSDKHTTP(t, s)
	}
	s1, hs1 := start()
	cb := sink.srv.URL + "/cb"
	for _, inv := range [][]byte{
		sdkInvocation("quick", "call_q", "thread_d", cb, nil),
		sdkInvocation("watch", "call_w", "thread_d", cb, map[string]any{"repo": "a/b"}),
	} {
		if code, body, _ := sdkPost(t, hs1.URL, inv); code != http.StatusOK {
			t.Fatalf("invocation answered %d %s", code, body)
		}
	}
	waitStatus(t, hs1.URL, "thread_d", "call_q", rap.CallDelivering)
	waitStatus(t, hs1.URL, "thread_d", "call_w", rap.CallSubscribed)
	hs1.Close()
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_ = s1.Shutdown(sctx) // the outbox cannot drain: the runtime is down
	scancel()

	s2, hs2 := start()
	defer func() {
		sink.down.Store(false)
		_ = s2.Shutdown(ctx)
	}()
	waitStatus(t, hs2.URL, "thread_d", "call_q", rap.CallDelivering)
	waitStatus(t, hs2.URL, "thread_d", "call_w", rap.CallSubscribed)
	if code, _, text := statusOf(t, hs2.URL, "thread_d", "call_gone"); code != http.StatusNotFound {
		t.Errorf("unknown call answered %d %s", code, text)
	}
	sink.down.Store(false)
	waitStatus(t, hs2.URL, "thread_d", "call_q", rap.CallUnknown)
}
