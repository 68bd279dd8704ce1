package main

// This file owns the OTLP/HTTP sink of "rap bench-runtime --otlp-sink"
// (hidden): a trace receiver that reads each export and throws it away,
// so that a benchmark can measure what exporting spans costs the runtime
// without a collector's own work on the machine.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// maxOTLPExportBytes bounds one export the sink reads.
const maxOTLPExportBytes = 64 << 20

// otlpSink answers POST /v1/traces with an empty ExportTraceServiceResponse
// (the empty protobuf message: no bytes) after reading the body.
func otlpSink() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, maxOTLPExportBytes)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	return mux
}

// serveOTLPSink serves otlpSink on addr until ctx ends, after printing its
// base URL (the OTEL_EXPORTER_OTLP_ENDPOINT to give the runtime).
func serveOTLPSink(ctx context.Context, addr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s for the OTLP sink: %w", addr, err)
	}
	srv := &http.Server{Handler: otlpSink(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	fmt.Fprintf(stdout, "OTLP/HTTP sink: OTEL_EXPORTER_OTLP_ENDPOINT=http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
