package rap_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// recordingRuntime is a callback endpoint that records every request it
// gets, answered or not, and answers with respond's status.
type recordingRuntime struct {
	srv *httptest.Server

	mu       sync.Mutex
	respond  func(r *http.Request, body []byte) int
	requests []recorded
}

type recorded struct {
	header http.Header
	body   []byte
	status int
}

func newRecordingRuntime(t *testing.T, respond func(r *http.Request, body []byte) int) *recordingRuntime {
	t.Helper()
	rt := &recordingRuntime{respond: respond}
	rt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status := rt.respond(r, body)
		rt.mu.Lock()
		rt.requests = append(rt.requests, recorded{header: r.Header.Clone(), body: body, status: status})
		rt.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rt.srv.Close)
	return rt
}

func (rt *recordingRuntime) all() []recorded {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]recorded(nil), rt.requests...)
}

// accepted returns the decoded callbacks answered 2xx.
func (rt *recordingRuntime) accepted(t *testing.T) []rap.Callback {
	t.Helper()
	var out []rap.Callback
	for _, r := range rt.all() {
		if r.status/100 != 2 {
			continue
		}
		cb, err := rap.DecodeCallback(r.body)
		if err != nil {
			t.Errorf("runtime got a malformed callback: %v", err)
			continue
		}
		out = append(out, cb)
	}
	return out
}

func ok200(*http.Request, []byte) int { return http.StatusOK }

type sizeIn struct {
	Bytes int `json:"bytes"`
}

func addBig(s *rap.Server) {
	rap.AddTool(s, &rap.Tool{Name: "big", Description: "Returns a result of the given size."},
		func(ctx context.Context, c *rap.Call, in sizeIn) (*rap.Reply, error) {
			return rap.Text(strings.Repeat("x", in.Bytes)), nil
		})
}

// A result over rap.MaxCallbackBytes is never silently
// dropped: the call ends in a short "Error: " result that gives the size
// and the limit and says to link large data (RAP IN-4, RE-4).
func TestResultOverLimitBecomesErrorResult(t *testing.T) {
	var logs lockedBuffer
	rt := newRecordingRuntime(t, ok200)
	_, hs := newSDKServer(t, &rap.ServerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, addBig)
	size := rap.MaxCallbackBytes + 10
	if status, msg, _ := sdkPost(t, hs.URL, sdkInvocation("big", "c1", "t1", rt.srv.URL+"/cb", map[string]any{"bytes": size})); status != 200 {
		t.Fatalf("invocation answered %d %q", status, msg)
	}
	var got []rap.Callback
	sdkPoll(t, "a tool result", func() bool { got = rt.accepted(t); return len(got) > 0 })
	r, ok := got[0].(*rap.ToolResult)
	if !ok || r.ID != "c1" || r.GroupID != "t1" {
		t.Fatalf("got %s, want the tool_result of c1", sdkDescribe(got))
	}
	for _, want := range []string{"Error: ", "too large", fmt.Sprint(rap.MaxCallbackBytes), "linked"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("result text %q does not contain %q", r.Text, want)
		}
	}
	if len(r.Text) > 1024 {
		t.Errorf("error result is %d bytes; want a short one", len(r.Text))
	}
	if !strings.Contains(logs.String(), "over the callback size limit") {
		t.Errorf("the oversized result was not logged; logs:\n%s", logs.String())
	}
}

// A runtime with a smaller limit answers 413 to a tool
// result; the SDK then sends, once, a short "Error: " result instead of
// giving up, and a second 413 dead-letters it rather than looping.
func TestRuntime413GetsErrorResultOnce(t *testing.T) {
	const runtimeLimit = 1 << 20
	small := newRecordingRuntime(t, func(_ *http.Request, body []byte) int {
		if len(body) > runtimeLimit {
			return http.StatusRequestEntityTooLarge
		}
		return http.StatusOK
	})
	refuseAll := newRecordingRuntime(t, func(*http.Request, []byte) int { return http.StatusRequestEntityTooLarge })
	for _, withStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", withStore), func(t *testing.T) {
			opts := &rap.ServerOptions{}
			if withStore {
				opts.Store = sdkStore(t, filepath.Join(t.TempDir(), "tool.db"))
			}
			srv, hs := newSDKServer(t, opts, addBig)
			id := fmt.Sprintf("c-%v", withStore)
			sdkPost(t, hs.URL, sdkInvocation("big", id, "t1", small.srv.URL+"/cb", map[string]any{"bytes": 2 << 20}))
			var res *rap.ToolResult
			sdkPoll(t, "the error result", func() bool {
				for _, cb := range small.accepted(t) {
					if r, ok := cb.(*rap.ToolResult); ok && r.ID == id {
						res = r
						return true
					}
				}
				return false
			})
			if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "413") || !strings.Contains(res.Text, "linked") {
				t.Errorf("result text %q; want an Error: result naming the 413 and saying to link large data", res.Text)
			}

			id2 := id + "-refused"
			sdkPost(t, hs.URL, sdkInvocation("big", id2, "t1", refuseAll.srv.URL+"/cb", map[string]any{"bytes": 10}))
			sdkPoll(t, "the refused result to be dead-lettered", func() bool {
				dl, err := srv.DeadLetters(context.Background(), 10)
				return err == nil && len(dl) == 1 && dl[0].Status == http.StatusRequestEntityTooLarge
			})
			n := 0
			for _, r := range refuseAll.all() {
				if bytes.Contains(r.body, []byte(id2)) {
					n++
				}
			}
			if n != 2 {
				t.Errorf("the refusing runtime got %d requests for %s, want 2: the result and one error result", n, id2)
			}
		})
	}
}

// A subscription event over the limit is not sent, and
// Emit says why.
func TestEmitOverLimitFails(t *testing.T) {
	rt := newRecordingRuntime(t, ok200)
	emitted := make(chan error, 1)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddSubscription(s, &rap.Tool{Name: "watch", Description: "Watches."},
			func(ctx context.Context, sub *rap.Subscription, in watchIn) error {
				emitted <- sub.Emit(ctx, strings.Repeat("y", rap.MaxCallbackBytes))
				<-ctx.Done()
				return nil
			})
	})
	sdkPost(t, hs.URL, sdkInvocation("watch", "s1", "t1", rt.srv.URL+"/cb", map[string]any{"repo": "r"}))
	select {
	case err := <-emitted:
		if err == nil || !strings.Contains(err.Error(), "byte limit") || !strings.Contains(err.Error(), "link") {
			t.Errorf("Emit of an oversized event returned %v; want an error naming the byte limit and saying to link large data", err)
		}
	case <-time.After(sdkWait):
		t.Fatal("the handler never emitted")
	}
}

// Retries end. A message still undelivered after the
// maximum retry age, or refused with a final 4xx, is dead-lettered in the
// durable store: listed, retried and dropped there.
func TestRetryAgeAndRefusalDeadLetter(t *testing.T) {
	var logs lockedBuffer
	failing := true
	var mu sync.Mutex
	rt := newRecordingRuntime(t, func(r *http.Request, _ []byte) int {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/refuse"):
			return http.StatusNotFound
		case failing:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	st := openStore(t, filepath.Join(t.TempDir(), "tool.db"))
	defer st.Close()
	s := rap.NewSender(rap.SenderOptions{Outbox: st, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Retry: rap.RetryPolicy{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, GiveUpAfter: 300 * time.Millisecond}})
	stop := runSender(t, s)
	defer stop()
	ctx := context.Background()
	if err := s.Send(ctx, rt.srv.URL+"/old/abcdefghijklmnopqrstuvwxyz?token=secret", result(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, rt.srv.URL+"/refuse?token=secret", result(2)); err != nil {
		t.Fatal(err)
	}
	flush(t, s) // returns: dead letters are not pending
	dl, err := st.DeadLetters(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]rap.DeadLetter{}
	for _, d := range dl {
		reasons[d.URL[len(rt.srv.URL):]] = d
	}
	old, refused := reasons["/old/abcdefghijklmnopqrstuvwxyz?token=secret"], reasons["/refuse?token=secret"]
	// How many attempts fit in the retry age depends on the machine's
	// load: at least one is made, and the last answer is kept.
	if len(dl) != 2 || !strings.Contains(old.Reason, "maximum retry age") || old.Status != http.StatusServiceUnavailable {
		t.Fatalf("dead letters %+v; want the 503ed message past its retry age", dl)
	}
	if refused.Status != http.StatusNotFound || !strings.Contains(refused.Reason, "404") {
		t.Errorf("dead letter of the refused message %+v; want status 404", refused)
	}
	if sdl, _ := s.DeadLetters(ctx, 10); len(sdl) != 2 {
		t.Errorf("Sender.DeadLetters lists %d, want 2", len(sdl))
	}
	if n := strings.Count(logs.String(), "dead-lettered"); n != 2 {
		t.Errorf("%d dead-letter log records, want one per message", n)
	}
	if strings.Contains(logs.String(), "secret") || strings.Contains(logs.String(), "abcdefghijklmnopqrstuvwxyz") {
		t.Errorf("logs hold the callback URL's secrets:\n%s", logs.String())
	}

	// Retried by an operator once the runtime is back: delivered.
	mu.Lock()
	failing = false
	mu.Unlock()
	if err := st.RetryDeadLetter(ctx, old.Key); err != nil {
		t.Fatal(err)
	}
	sdkPoll(t, "the retried dead letter to be delivered", func() bool { return len(rt.accepted(t)) == 1 })
	if err := st.DropDeadLetter(ctx, refused.Key); err != nil {
		t.Fatal(err)
	}
	if err := st.DropDeadLetter(ctx, refused.Key); !errors.Is(err, rap.ErrNoDeadLetter) {
		t.Errorf("dropping twice: %v, want ErrNoDeadLetter", err)
	}
	if dl, _ := st.DeadLetters(ctx, 10); len(dl) != 0 {
		t.Errorf("dead letters left: %+v", dl)
	}
}
