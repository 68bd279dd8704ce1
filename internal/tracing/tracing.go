// Package tracing sets up OpenTelemetry tracing for gorap's commands from
// the standard OTEL_* environment variables, and wraps a slog.Handler so
// that every record written inside a traced operation carries its
// trace_id and span_id (docs/observability.md, Traces).
//
// Tracing is off unless OTEL_TRACES_EXPORTER or an
// OTEL_EXPORTER_OTLP_*ENDPOINT variable is set: then FromEnv returns nil
// and the programs run with no tracer at all.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is a tracer provider set up by FromEnv. Shutdown flushes the
// spans not yet exported and stops the exporter; call it once, as the
// process ends.
type Provider struct {
	trace.TracerProvider
	// Exporter names what the spans go to: "otlp (http/protobuf)",
	// "otlp (grpc)" or "console".
	Exporter string
	sdk      *sdktrace.TracerProvider
}

// Shutdown exports the spans still buffered and stops the exporter,
// within ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// FromEnv reads the OTEL_* variables through getenv (os.Getenv when nil)
// and returns a tracer provider for the service serviceName, or nil when
// tracing is off. The variables it reads:
//
//   - OTEL_TRACES_EXPORTER: "otlp" (the default once an endpoint is
//     set), "console" (spans as JSON lines on console), or "none" (off).
//   - OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL:
//     "http/protobuf" (the default) or "grpc".
//   - OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//     OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT and the
//     other variables of the OTLP exporters, which read them themselves.
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, over serviceName.
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (the SDK's).
func FromEnv(ctx context.Context, serviceName string, getenv func(string) string, console io.Writer) (*Provider, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	exporter := strings.TrimSpace(strings.ToLower(getenv("OTEL_TRACES_EXPORTER")))
	endpoint := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch {
	case exporter == "none", exporter == "" && !endpoint:
		return nil, nil
	case exporter == "":
		exporter = "otlp"
	}
	var exp sdktrace.SpanExporter
	var name string
	switch exporter {
	case "otlp":
		protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if protocol == "" {
			protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		var err error
		switch protocol {
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx)
			name = "otlp (http/protobuf)"
		case "grpc":
			exp, err = otlptracegrpc.New(ctx)
			name = "otlp (grpc)"
		default:
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: gorap exports traces over \"http/protobuf\" or \"grpc\"", protocol)
		}
		if err != nil {
			return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
		}
	case "console":
		if console == nil {
			console = os.Stderr
		}
		exp, name = newConsoleExporter(console), "console"
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: gorap knows \"otlp\", \"console\" and \"none\"", exporter)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{TracerProvider: sdk, Exporter: name, sdk: sdk}, nil
}
