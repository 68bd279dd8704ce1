package bench

// This file breaks the callback→model latency of RunLatency down into the
// runtime's stages, read from its own OpenTelemetry spans: the callback's
// span (decoding, the durable write, the wake-up), the slice's span that
// the callback woke (linked to it) and the completion's span inside it.

import (
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Stage is one stage of the callback→model path and its distribution.
type Stage struct {
	Name string
	Distribution
}

// callbackStages are the stages, in order, of a tool result's way from
// its POST to the model request it causes.
var callbackStages = []string{
	"POST → runtime's handler (HTTP)",
	"handler: decode, durable write, wake",
	"wake → slice starts (scheduling)",
	"slice: load the thread, build the request",
	"completion span → model called (provider)",
}

// stageBreakdown matches each tool result POSTed at posted[callID] and
// whose model request started at started[callID] with the runtime's spans,
// and returns the distribution of each stage. Results whose spans are not
// all found are left out.
func stageBreakdown(spans []sdktrace.ReadOnlySpan, posted, started map[string]time.Time) []Stage {
	callbackByCall := map[string]sdktrace.ReadOnlySpan{}
	sliceByLink := map[string]sdktrace.ReadOnlySpan{} // callback span id → the slice it woke
	firstCompletion := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		switch {
		case s.Name() == "rap callback":
			if id, ok := attr(s.Attributes(), "gen_ai.tool.call.id"); ok {
				callbackByCall[id] = s
			}
		case s.Name() == "gorap slice":
			for _, l := range s.Links() {
				sliceByLink[l.SpanContext.SpanID().String()] = s
			}
		case strings.HasPrefix(s.Name(), "chat "):
			parent := s.Parent().SpanID().String()
			if c, ok := firstCompletion[parent]; !ok || s.StartTime().Before(c.StartTime()) {
				firstCompletion[parent] = s
			}
		}
	}
	samples := make([][]time.Duration, len(callbackStages))
	for id, p := range posted {
		m, ok := started[id]
		cb := callbackByCall[id]
		if !ok || cb == nil {
			continue
		}
		sl := sliceByLink[cb.SpanContext().SpanID().String()]
		if sl == nil {
			continue
		}
		comp := firstCompletion[sl.SpanContext().SpanID().String()]
		if comp == nil {
			continue
		}
		at := []time.Time{p, cb.StartTime(), cb.EndTime(), sl.StartTime(), comp.StartTime(), m}
		for i := range callbackStages {
			samples[i] = append(samples[i], max(0, at[i+1].Sub(at[i])))
		}
	}
	out := make([]Stage, len(callbackStages))
	for i, name := range callbackStages {
		out[i] = Stage{Name: name, Distribution: distribution(samples[i])}
	}
	return out
}

func attr(kvs []attribute.KeyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

// stagesString formats the breakdown.
func stagesString(stages []Stage) string {
	if len(stages) == 0 {
		return ""
	}
	s := "callback→model by stage (from the runtime's spans):\n"
	for _, st := range stages {
		s += fmt.Sprintf("  %-44s p50 %-10v p99 %v\n", st.Name, st.P50.Round(time.Microsecond), st.P99.Round(time.Microsecond))
	}
	return s
}
