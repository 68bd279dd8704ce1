package rap

// This file owns the W3C trace context of a call (a gorap extension of
// RAP, docs/observability.md): the server reads the traceparent and
// tracestate headers of an invocation, keeps them with the call (in the
// call journal too, CallRecord.TraceParent), runs the handler in a span
// that is their child when it has a tracer (ServerOptions.TracerProvider),
// and sends the same two headers with every callback of the call, so that
// the runtime links its callback span to its dispatch span. The headers
// are passed on whether or not the server traces.

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Headers of the W3C trace context.
const (
	TraceParentHeader = "Traceparent"
	TraceStateHeader  = "Tracestate"
)

// maxTraceHeaderBytes bounds a traceparent or tracestate header kept with
// a call; a longer one is dropped (W3C allows 512 bytes of tracestate).
const maxTraceHeaderBytes = 512

// traceContext is the W3C trace context an invocation carried.
type traceContext struct {
	parent, state string
}

func (t traceContext) valid() bool { return t.parent != "" }

// traceContextOf reads the trace context headers of h: only a valid
// traceparent is kept, in its canonical form.
func traceContextOf(h http.Header) traceContext {
	p := h.Get(TraceParentHeader)
	if p == "" || len(p) > maxTraceHeaderBytes || len(h.Get(TraceStateHeader)) > maxTraceHeaderBytes {
		return traceContext{}
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
	return traceContextFrom(sc)
}

// traceContextFrom writes sc as headers; zero when sc is not valid.
func traceContextFrom(sc trace.SpanContext) traceContext {
	if !sc.IsValid() {
		return traceContext{}
	}
	out := http.Header{}
	propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), propagation.HeaderCarrier(out))
	return traceContext{parent: out.Get(TraceParentHeader), state: out.Get(TraceStateHeader)}
}

// spanContext is the remote span context of t (invalid for none).
func (t traceContext) spanContext() trace.SpanContext {
	if !t.valid() {
		return trace.SpanContext{}
	}
	h := http.Header{TraceParentHeader: {t.parent}}
	if t.state != "" {
		h.Set(TraceStateHeader, t.state)
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// set writes t's headers on h.
func (t traceContext) set(h http.Header) {
	if t.parent != "" {
		h[TraceParentHeader] = []string{t.parent}
		if t.state != "" {
			h[TraceStateHeader] = []string{t.state}
		}
	}
}

// traceKey holds a call's trace context in the context of its sends.
type traceKey struct{}

// withTrace returns ctx carrying t for the callbacks sent with it.
func withTrace(ctx context.Context, t traceContext) context.Context {
	if !t.valid() {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) traceContext {
	t, _ := ctx.Value(traceKey{}).(traceContext)
	return t
}

// tracerName is the instrumentation scope of the server's spans.
const tracerName = "github.com/gorap/gorap/rap"

// startHandlerSpan starts the span of a call's handler, a child of the
// span context its invocation carried. Without a tracer it returns ctx
// and a span that records nothing.
func (s *Server) startHandlerSpan(ctx context.Context, c *Call) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	if sc := c.trace.spanContext(); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return s.tracer.Start(ctx, "execute_tool "+c.Invocation.Operation, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", c.Invocation.Operation),
			attribute.String("gen_ai.tool.call.id", c.Invocation.ID),
			attribute.String("gorap.toolset", s.name),
		))
}
