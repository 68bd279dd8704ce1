package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/config"
)

// rap serve stops at once, naming the value, when OTEL_TRACES_EXPORTER
// names an exporter gorap does not have.
func TestServeRefusesAnUnknownTracesExporter(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	err := serve(context.Background(), config.Settings{}, io.Discard, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "zipkin") {
		t.Fatalf("serve = %v; want an error naming OTEL_TRACES_EXPORTER's value", err)
	}
}

// Without the OTEL_* variables the commands get no tracer provider and
// their logger unchanged; with them, a provider, and a logger whose
// records say tracing is on.
func TestStartTracingFollowsTheVariables(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	log := slog.New(slog.DiscardHandler)
	tp, got, stop, err := startTracing(context.Background(), "gorap", log)
	if err != nil || tp != nil || got != log {
		t.Fatalf("startTracing without variables = %v, %v, %v; want nothing", tp, got, err)
	}
	stop()

	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing listens: nothing is sent
	var out bytes.Buffer
	tp, got, stop, err = startTracing(context.Background(), "gorap", slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil || tp == nil || got == nil {
		t.Fatalf("startTracing with OTEL_EXPORTER_OTLP_ENDPOINT = %v, %v; want a provider", tp, err)
	}
	if !strings.Contains(out.String(), "tracing on") || !strings.Contains(out.String(), "otlp (http/protobuf)") {
		t.Errorf("log = %q; want a line saying tracing is on, with the exporter", out.String())
	}
	stop()
}
