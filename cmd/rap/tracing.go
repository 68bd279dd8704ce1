package main

// This file owns tracing for the commands that serve: the tracer
// provider the OTEL_* variables ask for (internal/tracing), the logger
// whose records carry the trace and span ids, and the flush at the end.

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/internal/tracing"
)

// startTracing sets up the tracer provider of the OTEL_* variables for
// the command what. It returns nil (and log unchanged) when they ask for
// none; otherwise the provider, log wrapped so that records written in a
// span carry trace_id and span_id, and the function that flushes the
// spans as the command ends.
func startTracing(ctx context.Context, what string, log *slog.Logger) (trace.TracerProvider, *slog.Logger, func(), error) {
	tp, err := tracing.FromEnv(ctx, what, nil, nil)
	if err != nil || tp == nil {
		return nil, log, func() {}, err
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	log.Info("tracing on", "exporter", tp.Exporter)
	return tp, log, func() {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans not exported at shutdown", "err", err)
		}
	}, nil
}
