package tracing

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// consoleExporter writes each span as one JSON line (OTEL_TRACES_EXPORTER
// =console): for a look at what is traced, not for production.
type consoleExporter struct {
	mu sync.Mutex
	w  io.Writer
}

func newConsoleExporter(w io.Writer) *consoleExporter { return &consoleExporter{w: w} }

// consoleSpan is what the console exporter writes of a span.
type consoleSpan struct {
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	TraceID    string            `json:"trace_id"`
	SpanID     string            `json:"span_id"`
	ParentID   string            `json:"parent_span_id,omitempty"`
	Start      time.Time         `json:"start"`
	Duration   string            `json:"duration"`
	Status     string            `json:"status,omitempty"`
	Attributes map[string]any    `json:"attributes,omitempty"`
	Links      []consoleSpanLink `json:"links,omitempty"`
}

type consoleSpanLink struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *consoleExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	enc := json.NewEncoder(e.w)
	for _, s := range spans {
		c := consoleSpan{Name: s.Name(), Kind: s.SpanKind().String(), TraceID: s.SpanContext().TraceID().String(),
			SpanID: s.SpanContext().SpanID().String(), Start: s.StartTime().UTC(), Duration: s.EndTime().Sub(s.StartTime()).String()}
		if s.Parent().IsValid() {
			c.ParentID = s.Parent().SpanID().String()
		}
		if st := s.Status(); st.Code != 0 {
			c.Status = st.Code.String() + ": " + st.Description
		}
		if attrs := s.Attributes(); len(attrs) > 0 {
			c.Attributes = make(map[string]any, len(attrs))
			for _, a := range attrs {
				c.Attributes[string(a.Key)] = a.Value.AsInterface()
			}
		}
		for _, l := range s.Links() {
			c.Links = append(c.Links, consoleSpanLink{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()})
		}
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter.
func (e *consoleExporter) Shutdown(context.Context) error { return nil }
