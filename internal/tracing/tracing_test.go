package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Without OTEL_TRACES_EXPORTER or an OTLP endpoint, or with
// OTEL_TRACES_EXPORTER=none, there is no tracer provider at all.
func TestFromEnvOffWithoutTheVariables(t *testing.T) {
	for _, vars := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x"},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
	} {
		p, err := FromEnv(context.Background(), "gorap", env(vars), nil)
		if err != nil || p != nil {
			t.Errorf("FromEnv(%v) = %v, %v; want no provider", vars, p, err)
		}
	}
}

// An endpoint alone turns OTLP over HTTP on; grpc is chosen by the
// protocol variable; a value gorap does not know is an error naming it.
func TestFromEnvChoosesTheExporter(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "otlp (http/protobuf)"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp (grpc)"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "console"},
	} {
		p, err := FromEnv(context.Background(), "gorap", env(c.vars), &bytes.Buffer{})
		if err != nil || p == nil || p.Exporter != c.want {
			t.Errorf("FromEnv(%v) = %+v, %v; want the %s exporter", c.vars, p, err, c.want)
			continue
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	for _, vars := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
	} {
		_, err := FromEnv(context.Background(), "gorap", env(vars), nil)
		if err == nil || (!strings.Contains(err.Error(), "zipkin") && !strings.Contains(err.Error(), "http/json")) {
			t.Errorf("FromEnv(%v) = %v; want an error naming the value", vars, err)
		}
	}
}

// The console exporter writes each span as a JSON line when the provider
// shuts down, and a log record written in the span names it.
func TestConsoleSpansAndLogsJoinUp(t *testing.T) {
	var out, logs bytes.Buffer
	p, err := FromEnv(context.Background(), "gorap", env(map[string]string{"OTEL_TRACES_EXPORTER": "console"}), &out)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(LogHandler(slog.NewJSONHandler(&logs, nil)))
	ctx, span := p.Tracer("test").Start(context.Background(), "work")
	log.InfoContext(ctx, "inside")
	log.Info("outside")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got consoleSpan
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("console output %q: %v", out.String(), err)
	}
	if got.Name != "work" || got.TraceID != span.SpanContext().TraceID().String() {
		t.Errorf("console span = %+v", got)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines = %q", lines)
	}
	var in, outside map[string]any
	json.Unmarshal([]byte(lines[0]), &in)
	json.Unmarshal([]byte(lines[1]), &outside)
	if in["trace_id"] != got.TraceID || in["span_id"] != got.SpanID {
		t.Errorf("record inside the span = %v; want trace_id %s, span_id %s", in, got.TraceID, got.SpanID)
	}
	if _, ok := outside["trace_id"]; ok {
		t.Errorf("record without a context = %v; want no trace_id", outside)
	}
}
