package runtime

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/internal/tracing"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// tracedToolServer is a rap SDK server with its own tracer provider whose
// tool "greet" answers once release is closed; it records the trace
// context headers of the invocations it gets.
type tracedToolServer struct {
	url     string
	spans   *tracetest.SpanRecorder
	release chan struct{}
	mu      sync.Mutex
	headers []http.Header
}

func newTracedToolServer(t *testing.T) *tracedToolServer {
	return newTracedToolServerWith(t, nil)
}

// newTracedToolServerWith is newTracedToolServer tracing to tp; with tp
// nil, to a provider that records its spans in spans.
func newTracedToolServerWith(t *testing.T, tp trace.TracerProvider) *tracedToolServer {
	ts := &tracedToolServer{spans: tracetest.NewSpanRecorder(), release: make(chan struct{})}
	if tp == nil {
		tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ts.spans))
	}
	srv := rap.NewServer("greeter", &rap.ServerOptions{TracerProvider: tp})
	type in struct {
		Name string `json:"name"`
	}
	rap.AddTool(srv, &rap.Tool{Name: "greet", Description: "greets someone"}, func(ctx context.Context, c *rap.Call, a in) (*rap.Reply, error) {
		select {
		case <-ts.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return rap.Text("hello, " + a.Name), nil
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.url = newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			ts.mu.Lock()
			ts.headers = append(ts.headers, r.Header.Clone())
			ts.mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ts
}

func (ts *tracedToolServer) invocationHeaders() []http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]http.Header(nil), ts.headers...)
}

// waitSpans polls rec until cond holds of its ended spans.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, what string, cond func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		spans := rec.Ended()
		if cond(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name())
			}
			t.Fatalf("no %s among the spans: %s", what, strings.Join(names, ", "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func named(spans []sdktrace.ReadOnlySpan, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) (string, bool) {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.String(), true
		}
	}
	return "", false
}

func linksTo(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// One tool call, followed through its spans with the runtime restarted
// while the tool runs: the completion and the dispatch share the slice's
// trace; the tool server's handler span is the dispatch span's child; the
// callback, received by the restarted runtime, starts a trace of its own
// linked to the dispatch span (from the callback's traceparent header);
// the next completion is linked to the callback. The audit log line of
// the invocation carries the dispatch's trace and span ids, and no span
// carries the call's arguments or result.
func TestTracesFollowACallAcrossARestart(t *testing.T) {
	ts := newTracedToolServer(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var logs *logBuffer
	e := newEnv(t, envOptions{servers: []string{ts.url}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("greet", `{"name":"Ada Lovelace"}`)}},
		{Text: "{{last_result}}"},
	}, tweak: func(c *Config) {
		c.TracerProvider = tp
		c.Logger = slog.New(tracing.LogHandler(c.Logger.Handler()))
	}})
	logs = e.logs
	th := e.newThread()
	e.post(th, "greet Ada")

	spans := waitSpans(t, rec, "dispatch span", func(s []sdktrace.ReadOnlySpan) bool { return len(named(s, "execute_tool greet")) == 1 })
	dispatch := named(spans, "execute_tool greet")[0]
	if dispatch.SpanKind() != trace.SpanKindClient {
		t.Errorf("dispatch span kind = %v, want client", dispatch.SpanKind())
	}
	if v, _ := attr(dispatch, "gorap.toolset"); v != "greeter" {
		t.Errorf("dispatch span gorap.toolset = %q, want greeter", v)
	}
	if v, _ := attr(dispatch, "http.response.status_code"); v != "200" {
		t.Errorf("dispatch span http.response.status_code = %q, want 200", v)
	}
	e.restart() // the tool still runs: its callback reaches the new runtime
	close(ts.release)
	e.waitHistory(th, "the greeting", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "hello, Ada Lovelace") })
	spans = waitSpans(t, rec, "second completion", func(s []sdktrace.ReadOnlySpan) bool {
		return len(named(s, "chat ")) == 2 && len(named(s, "rap callback")) == 1
	})

	chats := named(spans, "chat ")
	first, second := chats[0], chats[1]
	if first.StartTime().After(second.StartTime()) {
		first, second = second, first
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
		"gen_ai.request.model": "inline (scripted test model — not a real LLM)", "gen_ai.response.finish_reasons": `["tool_use"]`} {
		if v, _ := attr(first, k); v != want {
			t.Errorf("first completion %s = %q, want %q", k, v, want)
		}
	}
	for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
		if _, ok := attr(first, k); !ok {
			t.Errorf("first completion has no %s", k)
		}
	}
	if first.SpanKind() != trace.SpanKindClient || first.Name() != "chat inline (scripted test model — not a real LLM)" {
		t.Errorf("first completion span = %q (%v)", first.Name(), first.SpanKind())
	}
	// The first completion and the dispatch are children of one slice.
	if first.SpanContext().TraceID() != dispatch.SpanContext().TraceID() || first.Parent().SpanID() != dispatch.Parent().SpanID() {
		t.Errorf("the first completion (parent %s) and the dispatch (parent %s) are not in one slice",
			first.Parent().SpanID(), dispatch.Parent().SpanID())
	}
	var slice sdktrace.ReadOnlySpan
	for _, s := range named(spans, "gorap slice") {
		if s.SpanContext().SpanID() == dispatch.Parent().SpanID() {
			slice = s
		}
	}
	if slice == nil {
		t.Fatal("the dispatch span's parent is not a slice span")
	}

	// The tool server's span is the dispatch span's child.
	toolSpans := waitSpans(t, ts.spans, "tool server span", func(s []sdktrace.ReadOnlySpan) bool { return len(named(s, "execute_tool greet")) == 1 })
	handler := named(toolSpans, "execute_tool greet")[0]
	if handler.SpanContext().TraceID() != dispatch.SpanContext().TraceID() || handler.Parent().SpanID() != dispatch.SpanContext().SpanID() {
		t.Errorf("tool server span in trace %s under %s; want trace %s under the dispatch span %s",
			handler.SpanContext().TraceID(), handler.Parent().SpanID(), dispatch.SpanContext().TraceID(), dispatch.SpanContext().SpanID())
	}
	if handler.SpanKind() != trace.SpanKindServer {
		t.Errorf("tool server span kind = %v, want server", handler.SpanKind())
	}

	// The callback: a trace of its own, linked to the dispatch.
	cb := named(spans, "rap callback")[0]
	if cb.SpanContext().TraceID() == dispatch.SpanContext().TraceID() {
		t.Error("the callback span is in the dispatch's trace; want a trace of its own, linked")
	}
	if !linksTo(cb, dispatch.SpanContext()) {
		t.Errorf("callback span links = %v, want one to the dispatch span %s", cb.Links(), dispatch.SpanContext().SpanID())
	}
	if v, _ := attr(cb, "gorap.callback.type"); v != "tool_result" {
		t.Errorf("callback span gorap.callback.type = %q", v)
	}
	// The next completion answers the callback: linked to it.
	if !linksTo(second, cb.SpanContext()) {
		t.Errorf("second completion links = %v, want one to the callback span", second.Links())
	}

	// Logs join up: the audit line of the invocation names the dispatch.
	recs := logs.records("rap invocation")
	if len(recs) == 0 {
		t.Fatal("no audit log line of the invocation")
	}
	if recs[0]["trace_id"] != dispatch.SpanContext().TraceID().String() || recs[0]["span_id"] != dispatch.SpanContext().SpanID().String() {
		t.Errorf("audit line trace_id, span_id = %v, %v; want the dispatch span's %s, %s", recs[0]["trace_id"], recs[0]["span_id"],
			dispatch.SpanContext().TraceID(), dispatch.SpanContext().SpanID())
	}

	// The callback's log line names the callback span.
	if recs := logs.records("callback received"); len(recs) == 0 || recs[0]["span_id"] != cb.SpanContext().SpanID().String() {
		t.Errorf("callback log lines = %v; want one with the callback span's id %s", recs, cb.SpanContext().SpanID())
	}

	// Privacy: no span carries the arguments or the result.
	for _, s := range append(spans, toolSpans...) {
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.String(), "Lovelace") {
				t.Errorf("span %s attribute %s carries the call's arguments or result: %q", s.Name(), a.Key, a.Value.String())
			}
		}
	}
}

// Without a tracer provider the runtime sends no trace context headers,
// and nothing of tracing runs.
func TestNoTracerProviderSendsNoTraceHeaders(t *testing.T) {
	ts := newTracedToolServer(t)
	close(ts.release)
	e := newEnv(t, envOptions{servers: []string{ts.url}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("greet", `{"name":"Ada"}`)}},
		{Text: "{{last_result}}"},
	}})
	if e.rt.tracer != nil {
		t.Fatal("the runtime has a tracer without Config.TracerProvider")
	}
	th := e.newThread()
	e.post(th, "greet Ada")
	e.waitHistory(th, "the greeting", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "hello, Ada") })
	hs := ts.invocationHeaders()
	if len(hs) == 0 {
		t.Fatal("the tool server saw no invocation")
	}
	for _, h := range hs {
		if h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
			t.Errorf("invocation carried trace headers %q, %q without tracing", h.Get("Traceparent"), h.Get("Tracestate"))
		}
	}
	// The tool server traces on its own: its handler span starts a trace.
	for _, s := range ts.spans.Ended() {
		if s.Parent().IsValid() {
			t.Errorf("tool server span %s has parent %s; an invocation without trace context has none", s.Name(), s.Parent().SpanID())
		}
	}
}

// The links kept for the next slices are bounded: at most
// maxLinksPerThread per thread and maxLinkedThreads threads, the newest
// thread kept when full; a slice takes its thread's links once.
func TestSpanLinksAreBounded(t *testing.T) {
	var l spanLinks
	sc := func(i int) trace.Link {
		return trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(i), byte(i >> 8), 1}})}
	}
	for i := range maxLinksPerThread + 5 {
		l.add("t", sc(i))
	}
	if got := len(l.take("t")); got != maxLinksPerThread {
		t.Errorf("links kept for one thread = %d, want %d", got, maxLinksPerThread)
	}
	if got := len(l.take("t")); got != 0 {
		t.Errorf("links taken twice: %d the second time", got)
	}
	for i := range maxLinkedThreads + 10 {
		l.add("thread-"+strconv.Itoa(i), sc(i))
	}
	if n := len(l.m); n != maxLinkedThreads {
		t.Errorf("threads with links = %d, want at most %d", n, maxLinkedThreads)
	}
	l.add("newest", sc(1))
	if got := len(l.take("newest")); got != 1 {
		t.Errorf("a thread added to a full table kept %d links, want 1", got)
	}
}
