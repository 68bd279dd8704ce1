package runtime

// This file owns the runtime's OpenTelemetry spans (Config.TracerProvider):
// a slice, each completion (GenAI semantic conventions), each dispatch of a
// call (an HTTP client span whose context goes to the tool server in the
// W3C traceparent and tracestate headers), each callback received, each
// built-in call. A callback arrives long after its dispatch span ended, so
// its span starts a trace of its own, linked to the span context the tool
// sent back in the callback's headers, and the next slice of the thread is
// linked to the callbacks that woke it. Without Config.TracerProvider none
// of this runs. No span carries a tool's arguments or result, a message or
// a secret (docs/observability.md, Traces).

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/model"
)

// tracerName is the instrumentation scope of the runtime's spans.
const tracerName = "github.com/gorap/gorap/runtime"

// Span attributes of gorap's own (the others are OpenTelemetry's semantic
// conventions).
const (
	attrThread       = attribute.Key("gorap.thread.id")
	attrToolset      = attribute.Key("gorap.toolset")
	attrAttempts     = attribute.Key("gorap.attempts")
	attrCallbackType = attribute.Key("gorap.callback.type")
)

// propagator writes and reads the W3C trace context headers.
var propagator = propagation.TraceContext{}

// Bounds of the links kept for the next slice of a thread.
const (
	maxLinksPerThread = 16
	maxLinkedThreads  = 4096
)

// spanLinks keeps, per thread, the span contexts of the callbacks that
// gave it work, so that the slice that answers them is linked to them.
// It is memory only: after a restart the next slice is not linked. It
// holds at most maxLinkedThreads threads of maxLinksPerThread links.
type spanLinks struct {
	mu sync.Mutex
	m  map[string][]trace.Link
}

func (l *spanLinks) add(threadID string, links ...trace.Link) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]trace.Link{}
	}
	have, ok := l.m[threadID]
	if !ok && len(l.m) >= maxLinkedThreads {
		// Full of threads whose slice runs elsewhere or never: forget one
		// (map order: any) rather than link no new thread.
		for id := range l.m {
			delete(l.m, id)
			break
		}
	}
	for _, k := range links {
		if k.SpanContext.IsValid() && len(have) < maxLinksPerThread {
			have = append(have, k)
		}
	}
	l.m[threadID] = have
}

func (l *spanLinks) take(threadID string) []trace.Link {
	l.mu.Lock()
	defer l.mu.Unlock()
	links := l.m[threadID]
	delete(l.m, threadID)
	return links
}

// startSlice starts the span of a slice of the thread, linked to the
// callbacks that woke it. Without a tracer it returns ctx and a span that
// records nothing.
func (r *Runtime) startSlice(ctx context.Context, threadID string) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	links := r.links.take(threadID)
	if len(links) > 0 {
		ctx = context.WithValue(ctx, sliceLinksKey{}, links)
	}
	return r.tracer.Start(ctx, "gorap slice", trace.WithAttributes(attrThread.String(threadID)),
		trace.WithLinks(links...))
}

// sliceLinksKey holds, in a slice's context, the links of its span, which
// its completions get too.
type sliceLinksKey struct{}

// completionSpans holds what every completion span of the runtime's model
// carries, computed once: its name and its attributes.
type completionSpans struct {
	once  sync.Once
	name  string
	attrs []attribute.KeyValue
	// finish caches the finish-reason attribute of each stop reason seen
	// (a handful: tool_use, end_turn, max_tokens, …), at most maxFinish.
	mu     sync.Mutex
	finish map[string]attribute.KeyValue
}

// maxFinish bounds completionSpans.finish against a provider that names a
// new stop reason on every answer.
const maxFinish = 32

func (c *completionSpans) init(modelName string) {
	c.once.Do(func() {
		provider, mdl, ok := strings.Cut(modelName, ":")
		if !ok {
			provider, mdl = "", provider
		}
		c.name = "chat " + mdl
		c.attrs = []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", mdl),
		}
		if provider != "" {
			c.attrs = append(c.attrs, attribute.String("gen_ai.provider.name", provider))
		}
	})
}

// finishReason returns the gen_ai.response.finish_reasons attribute of
// one stop reason.
func (c *completionSpans) finishReason(reason string) attribute.KeyValue {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kv, ok := c.finish[reason]; ok {
		return kv
	}
	kv := attribute.StringSlice("gen_ai.response.finish_reasons", []string{reason})
	if c.finish == nil {
		c.finish = map[string]attribute.KeyValue{}
	}
	if len(c.finish) < maxFinish {
		c.finish[reason] = kv
	}
	return kv
}

// startCompletion starts the span of a completion (GenAI semantic
// conventions: an inference span named "chat MODEL"), a child of its
// slice's span, which names the thread.
func (r *Runtime) startCompletion(ctx context.Context) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	r.chatSpans.init(r.model.Name())
	// The slice's links: a reader of the completion alone sees which
	// callbacks it answers.
	links, _ := ctx.Value(sliceLinksKey{}).([]trace.Link)
	return r.tracer.Start(ctx, r.chatSpans.name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(r.chatSpans.attrs...), trace.WithLinks(links...))
}

// endCompletion ends a completion's span with its usage and finish
// reason, or its error. Tokens read from a cache are recorded when the
// provider reported some.
func (r *Runtime) endCompletion(span trace.Span, resp *model.Response, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, completionOutcome(err))
		span.SetAttributes(attribute.String("error.type", completionOutcome(err)))
	} else if resp != nil {
		attrs := make([]attribute.KeyValue, 0, 4)
		attrs = append(attrs,
			attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens))
		if resp.Usage.CachedInputTokens > 0 {
			attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", resp.Usage.CachedInputTokens))
		}
		if resp.StopReason != "" {
			attrs = append(attrs, r.chatSpans.finishReason(resp.StopReason))
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// startDispatch starts the span of a call's dispatch, a child of the span
// the call was made in (parent, invalid for a call dispatched later:
// after a restart, a confirmation, an adoption; such a span names the
// thread itself).
func (r *Runtime) startDispatch(ctx context.Context, parent trace.SpanContext, toolset, tool, callID, threadID string) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := make([]attribute.KeyValue, 4, 5)
	attrs[0] = attribute.String("gen_ai.operation.name", "execute_tool")
	attrs[1] = attribute.String("gen_ai.tool.name", tool)
	attrs[2] = attribute.String("gen_ai.tool.call.id", callID)
	attrs[3] = attrToolset.String(toolset)
	if parent.IsValid() {
		// Its parent, the slice's span, names the thread.
		ctx = trace.ContextWithSpanContext(ctx, parent)
	} else {
		attrs = append(attrs, attrThread.String(threadID))
	}
	return r.tracer.Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...))
}

// endDispatch ends a dispatch's span.
func endDispatch(span trace.Span, attempts, status int, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrAttempts.Int(attempts))
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if err != nil {
		span.SetStatus(codes.Error, "the tool server did not accept the call")
		span.SetAttributes(attribute.String("error.type", invocationOutcome(status, err)))
	}
	span.End()
}

// injectTrace sets the traceparent and tracestate headers of the span in
// ctx on h, when the runtime traces.
func (r *Runtime) injectTrace(ctx context.Context, h http.Header) {
	if r.tracer != nil {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// remoteKey holds, in a callback's context, the span context its
// headers carried.
type remoteKey struct{}

// startCallback starts the span of a callback received. The span context
// in ctx, if any, is the one the tool sent back in the callback's
// traceparent header (the dispatch's, docs/observability.md): the
// callback's span starts a trace of its own, linked to it.
func (r *Runtime) startCallback(ctx context.Context) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer)}
	if remote := trace.SpanContextFromContext(ctx); remote.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote}))
		ctx = context.WithValue(ctx, remoteKey{}, remote)
	}
	return r.tracer.Start(ctx, "rap callback", opts...)
}

// traceCallback names the thread and call of the callback in its span,
// once its token is checked.
func (r *Runtime) traceCallback(ctx context.Context, threadID, callID string) {
	if r.tracer != nil {
		trace.SpanFromContext(ctx).SetAttributes(attrThread.String(threadID), attribute.String("gen_ai.tool.call.id", callID))
	}
}

// linkSlice keeps the callback's span context, and the one its headers
// carried, for the next slice of the thread, which the callback wakes.
func (r *Runtime) linkSlice(ctx context.Context, threadID string) {
	if r.tracer == nil {
		return
	}
	links := []trace.Link{{SpanContext: trace.SpanContextFromContext(ctx)}}
	if remote, ok := ctx.Value(remoteKey{}).(trace.SpanContext); ok {
		links = append(links, trace.Link{SpanContext: remote})
	}
	r.links.add(threadID, links...)
}

// endCallback ends a callback's span with the message's type and the
// answer's status.
func endCallback(span trace.Span, kind string, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrCallbackType.String(kind), attribute.Int("http.response.status_code", status))
	if status >= 400 {
		span.SetStatus(codes.Error, "callback refused")
	}
	span.End()
}

// builtinSpan records a span for a built-in call run in a slice's commit.
func (r *Runtime) builtinSpan(ctx context.Context, name, callID string) trace.Span {
	if r.tracer == nil {
		return trace.SpanFromContext(ctx)
	}
	_, span := r.tracer.Start(ctx, "execute_tool "+name, trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", name),
		attribute.String("gen_ai.tool.call.id", callID),
		attrToolset.String(builtinToolset)))
	return span
}

// endSpan ends a span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "failed")
	}
	span.End()
}
