package rap_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gorap/gorap/rap"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "gorap=t61rcWkgMzE"
)

// headerSink is a runtime's callback endpoint that records the headers of
// each callback by the id it answers.
type headerSink struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]http.Header
}

func newHeaderSink(t *testing.T) *headerSink {
	k := &headerSink{got: map[string]http.Header{}}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		k.mu.Lock()
		k.got[m.ID] = r.Header.Clone()
		k.mu.Unlock()
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *headerSink) wait(t *testing.T, id string) http.Header {
	t.Helper()
	deadline := time.Now().Add(sdkWait)
	for time.Now().Before(deadline) {
		k.mu.Lock()
		h, ok := k.got[id]
		k.mu.Unlock()
		if ok {
			return h
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no callback for %s", id)
	return nil
}

// An invocation's trace context goes back with its callback, unchanged;
// the handler's span is the child of the span it names; an invocation
// without one, or with a malformed one, gets a callback without.
func TestTraceContextSentBackWithTheCallback(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	sink := newHeaderSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{Store: sdkStore(t, filepath.Join(t.TempDir(), "tool.db")), TracerProvider: tp},
		func(s *rap.Server) {
			rap.AddTool(s, &rap.Tool{Name: "greet", Description: "Greets."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				return rap.Text("hello"), nil
			})
		})
	inv := func(id string) []byte { return sdkInvocation("greet", id, "thread_t", sink.srv.URL, map[string]any{}) }
	if status, body, _ := sdkPost(t, hs.URL, inv("traced"), "Traceparent", traceParent, "Tracestate", traceState); status != 200 {
		t.Fatalf("refused: %d %s", status, body)
	}
	if status, body, _ := sdkPost(t, hs.URL, inv("plain")); status != 200 {
		t.Fatalf("refused: %d %s", status, body)
	}
	if status, body, _ := sdkPost(t, hs.URL, inv("malformed"), "Traceparent", "00-not-a-trace-01"); status != 200 {
		t.Fatalf("refused: %d %s", status, body)
	}
	h := sink.wait(t, "traced")
	if h.Get("Traceparent") != traceParent || h.Get("Tracestate") != traceState {
		t.Errorf("callback trace headers = %q, %q; want the invocation's %q, %q", h.Get("Traceparent"), h.Get("Tracestate"), traceParent, traceState)
	}
	for _, id := range []string{"plain", "malformed"} {
		if h := sink.wait(t, id); h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
			t.Errorf("%s: callback trace headers = %q, %q; want none", id, h.Get("Traceparent"), h.Get("Tracestate"))
		}
	}
	var traced sdktrace.ReadOnlySpan
	deadline := time.Now().Add(sdkWait)
	for traced == nil && time.Now().Before(deadline) {
		for _, s := range rec.Ended() {
			if s.Parent().IsRemote() {
				traced = s
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if traced == nil {
		t.Fatal("no handler span under the invocation's trace context")
	}
	if traced.Name() != "execute_tool greet" || traced.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		traced.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("handler span %q in trace %s under %s; want execute_tool greet under the invocation's span",
			traced.Name(), traced.SpanContext().TraceID(), traced.Parent().SpanID())
	}
}

// A call recorded in the journal with its trace context, interrupted by
// a crash, is answered after the restart with the same trace context.
func TestTraceContextKeptInTheCallJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tool.db")
	sink := newHeaderSink(t)
	st := sdkStore(t, path)
	if err := st.BeginCall(context.Background(), rap.CallRecord{GroupID: "thread_t", ID: "crashed", Operation: "build",
		CallbackURL: sink.srv.URL, Accepted: time.Now(), TraceParent: traceParent, TraceState: traceState}); err != nil {
		t.Fatal(err)
	}
	newSDKServer(t, &rap.ServerOptions{Store: st, Logger: sdkQuiet(), Retry: sdkFastRetry}, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "build", Description: "Builds."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			return rap.Text("built"), nil
		})
	})
	h := sink.wait(t, "crashed")
	if h.Get("Traceparent") != traceParent || h.Get("Tracestate") != traceState {
		t.Errorf("callback after the restart: trace headers = %q, %q; want %q, %q", h.Get("Traceparent"), h.Get("Tracestate"), traceParent, traceState)
	}
}

// The questions a handler asks the user (a user choice, a user input) go
// with the invocation's trace context, as its result does.
func TestTraceContextSentWithQuestions(t *testing.T) {
	var mu sync.Mutex
	got := map[string]http.Header{} // callback type → headers
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Type string `json:"type"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[m.Type] = r.Header.Clone()
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	_, hs := newSDKServer(t, &rap.ServerOptions{}, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "ask", Description: "Asks."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			if _, err := c.AskUser(ctx, "Go on?", []string{"yes", "no"}, 0, time.Millisecond); err != nil {
				return nil, err
			}
			if _, err := c.AskInput(ctx, "Name?", []rap.InputField{{Name: "name", Type: "string"}}, time.Millisecond); err != nil {
				return nil, err
			}
			return rap.Text("asked"), nil
		})
	})
	inv := withExtensions(t, sdkInvocation("ask", "q1", "thread_q", sink.URL, map[string]any{}), rap.ExtensionUserInput)
	if status, body, _ := sdkPost(t, hs.URL, inv, "Traceparent", traceParent); status != 200 {
		t.Fatalf("refused: %d %s", status, body)
	}
	deadline := time.Now().Add(sdkWait)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, typ := range []string{"user_choice", "user_input", "tool_result"} {
		h, ok := got[typ]
		if !ok {
			t.Errorf("no %s callback arrived", typ)
			continue
		}
		if h.Get("Traceparent") != traceParent {
			t.Errorf("%s: traceparent = %q, want the invocation's %q", typ, h.Get("Traceparent"), traceParent)
		}
	}
}
