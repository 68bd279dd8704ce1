package main

// This file owns the bridges' --metrics-listen: the tool server's metrics
// (rap.ServerOptions.Metrics) and the Go process's, served at /metrics on
// an address of its own, without a token.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
)

// metricsListenUsage is the help of the bridges' --metrics-listen.
const metricsListenUsage = "serve the tool server's metrics (Prometheus) at /metrics on `ADDR`, WITHOUT a token: listen on loopback or a private network only (default: no metrics)"

// addMetricsListenFlag defines --metrics-listen on fs, bound to addr.
func addMetricsListenFlag(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics-listen", "", metricsListenUsage)
}

// bridgeMetrics starts serving a new registry's metrics on addr for the
// bridge called what, and returns the registry for the bridge's
// rap.ServerOptions.Metrics and the function that stops serving. With
// addr empty it does nothing and returns a nil Registerer.
func bridgeMetrics(ctx context.Context, what, addr string, stdout io.Writer, log *slog.Logger) (prometheus.Registerer, func(), error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	url, stop, err := listenMetrics(ctx, addr, reg, log)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stdout, "rap bridge %s: metrics at %s WITHOUT a token (--metrics-listen: keep it on a private network)\n", what, url)
	return reg, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stop(sctx)
	}, nil
}
