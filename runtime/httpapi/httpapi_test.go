package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// fakeEngine answers as a runtime with one thread "t1" of user "alice".
type fakeEngine struct {
	Engine // methods the tests do not call panic
	stream *fakeStream
	follow error
	posted []string
}

func (f *fakeEngine) CheckThread(ctx context.Context, id string) error {
	if user, scoped := api.ScopedUser(ctx); id != "t1" || (scoped && user != "alice") {
		return fmt.Errorf("%w %q", api.ErrUnknownThread, id)
	}
	return nil
}

func (f *fakeEngine) PostMessageWithKey(ctx context.Context, id, text, key string) (bool, error) {
	if text == "" {
		return false, fmt.Errorf("%w: message text is empty", api.ErrBadInput)
	}
	f.posted = append(f.posted, text)
	return key == "", nil
}

func (f *fakeEngine) FollowEvents(ctx context.Context, id, lastID string) (api.EventStream, error) {
	if f.follow != nil {
		return nil, f.follow
	}
	return f.stream, nil
}

func (f *fakeEngine) DeliverCallback(ctx context.Context, token string, body io.Reader, key string) api.CallbackResult {
	if token != "good" {
		return api.CallbackResult{Status: http.StatusForbidden, Message: "invalid callback token", TokenRefused: true}
	}
	if _, err := io.ReadAll(body); err != nil {
		return api.CallbackResult{Status: http.StatusRequestEntityTooLarge, Message: err.Error()}
	}
	return api.CallbackResult{Status: http.StatusServiceUnavailable, Message: "later", RetryAfter: 7}
}

// fakeStream replays its replay, then hands out live and ends.
type fakeStream struct {
	mu     sync.Mutex
	replay []api.Event
	live   []api.Event
	ready  chan struct{}
	closed bool
}

func (s *fakeStream) Replay() []api.Event    { return s.replay }
func (s *fakeStream) Ready() <-chan struct{} { return s.ready }
func (s *fakeStream) Next() ([]api.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		return nil, true
	}
	out := s.live
	s.live = nil
	s.ready <- struct{}{}
	return out, false
}
func (s *fakeStream) OnDrop(func())      {}
func (s *fakeStream) Closed() bool       { return false }
func (s *fakeStream) DropReason() string { return "" }
func (s *fakeStream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

func do(h http.Handler, ctx context.Context, method, path, body string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:5000"
	req.Host = "127.0.0.1:8080"
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// New never changes the caller's Options, and nil options answer loopback
// clients only.
func TestNewKeepsOptionsAndDefaultsToLoopback(t *testing.T) {
	opts := &Options{AllowedHosts: []string{"a.example"}}
	New(&fakeEngine{}, opts)
	if opts.Log != nil || opts.StreamWriteTimeout != 0 || len(opts.AllowedHosts) != 1 {
		t.Errorf("New changed the caller's options: %+v", opts)
	}
	h := New(&fakeEngine{}, nil)
	req := httptest.NewRequest("POST", "/v1/threads/t1/messages", strings.NewReader(`{"text":"hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = "192.0.2.1:5000"
	req.Host = "127.0.0.1:8080"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "only requests from this machine") {
		t.Errorf("a remote client without auth got %d %s, want 403", w.Code, w.Body)
	}
}

// A caller bound to another user gets 404 for a thread before its body is
// read; the engine's errors map to their statuses.
func TestThreadRoutesScopeAndMapErrors(t *testing.T) {
	f := &fakeEngine{}
	h := New(f, nil)
	bob := api.WithCaller(context.Background(), api.Caller{UserID: "bob"})
	if w := do(h, bob, "POST", "/v1/threads/t1/messages", `not json`, nil); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `unknown thread \"t1\"`) {
		t.Errorf("another user's thread: %d %s, want 404", w.Code, w.Body)
	}
	alice := api.WithCaller(context.Background(), api.Caller{UserID: "alice"})
	if w := do(h, alice, "POST", "/v1/threads/t1/messages", `{"text":""}`, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "bad input") {
		t.Errorf("empty text: %d %s, want 400", w.Code, w.Body)
	}
	if w := do(h, alice, "POST", "/v1/threads/t1/messages", `{"text":"hi"}`, map[string]string{"Idempotency-Key": "k"}); w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), "duplicate") {
		t.Errorf("repeated key: %d %s, want 202 duplicate", w.Code, w.Body)
	}
	if w := do(h, alice, "POST", "/v1/threads/t1/messages", `{"text":"a","text":"b"}`, nil); w.Code != http.StatusBadRequest || len(f.posted) != 1 {
		t.Errorf("duplicate member: %d %s (posted %v), want 400 and nothing posted", w.Code, w.Body, f.posted)
	}
}

// The event stream writes the replay, then live events with their ids, in
// Server-Sent Events framing, and closes the stream.
func TestEventStreamFraming(t *testing.T) {
	s := &fakeStream{ready: make(chan struct{}, 1),
		replay: []api.Event{{ID: "m:1", Type: api.EventThread, Data: []byte(`{}`)}, {ID: "m", Type: api.EventReplayDone, Data: []byte(`{"mode":"full"}`)}},
		live:   []api.Event{{ID: "v2.x.3", Type: api.EventStatus, Data: []byte(`{"state":"idle"}`)}}}
	s.ready <- struct{}{}
	h := New(&fakeEngine{stream: s}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w := do(h, ctx, "GET", "/v1/threads/t1/events", "", nil)
	want := ": connected\n\nid: m:1\nevent: thread\ndata: {}\n\nid: m\nevent: replay_done\ndata: {\"mode\":\"full\"}\n\n" +
		"id: v2.x.3\nevent: status\ndata: {\"state\":\"idle\"}\n\n"
	if got := w.Body.String(); got != want || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream = %q, want %q", got, want)
	}
	if !s.closed {
		t.Error("the stream was not closed")
	}
}

// Past a stream limit the answer is 429 or 503 with Retry-After and the
// engine's text.
func TestEventStreamLimits(t *testing.T) {
	for status, kind := range map[int]error{http.StatusTooManyRequests: api.ErrTooManyStreams, http.StatusServiceUnavailable: api.ErrStreamsFull} {
		h := New(&fakeEngine{follow: fmt.Errorf("%w: the limit", kind)}, nil)
		w := do(h, context.Background(), "GET", "/v1/threads/t1/events", "", nil)
		if w.Code != status || w.Header().Get("Retry-After") != "5" || !strings.Contains(w.Body.String(), "the limit") {
			t.Errorf("%v: %d %q %s, want %d with Retry-After", kind, w.Code, w.Header().Get("Retry-After"), w.Body, status)
		}
	}
}

// A callback with a bad token is refused before its body is read; the
// engine's result sets the status and Retry-After.
func TestCallbackEndpoint(t *testing.T) {
	h := New(&fakeEngine{}, &Options{Log: slog.New(slog.DiscardHandler)})
	big := strings.Repeat("x", rap.MaxCallbackBytes+1)
	if w := do(h, context.Background(), "POST", CallbackPath+"bad", big, nil); w.Code != http.StatusForbidden {
		t.Errorf("bad token with a large body: %d, want 403", w.Code)
	}
	if w := do(h, context.Background(), "POST", CallbackPath+"good", big, nil); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("good token with a large body: %d, want 413", w.Code)
	}
	w := do(h, context.Background(), "POST", CallbackPath+"good", `{}`, nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "7" || !strings.Contains(w.Body.String(), `"error":"later"`) {
		t.Errorf("deferred callback: %d %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}
