package main

// This file owns rap serve's metrics: a Prometheus registry with the
// runtime's metrics (runtime/metrics) and the Go process's, served at
// /metrics on the main address behind the client token, and, with
// --metrics-listen, on an address of its own without one.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/httpapi"
	"github.com/gorap/gorap/runtime/metrics"
)

// newServeMetrics returns rap serve's registry, with the Go runtime's and
// the process's collectors, and the runtime's metrics on it.
func newServeMetrics(log *slog.Logger) (*prometheus.Registry, *metrics.Runtime, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, err
	}
	m, err := metrics.New(reg, &metrics.Options{Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("define the metrics: %w", err)
	}
	return reg, m, nil
}

// withMetricsRoute sends GET /metrics to api (the runtime's handler,
// which serves it behind the client API's authentication) and every other
// request to next.
func withMetricsRoute(next, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == httpapi.MetricsPath {
			api.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// listenMetrics serves GET /metrics of reg on addr, without
// authentication, until stop; it returns the URL of /metrics.
func listenMetrics(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) (url string, stop func(context.Context), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen on %s for metrics: %w (pass --metrics-listen ADDR to use another address)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	var limits rap.HTTPLimits
	srv := runtime.NewHTTPServer(mux, limits, log)
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	go func() {
		if err := srv.Serve(limits.Listener(ln, log)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "listen", addr, "err", err)
		}
	}()
	listen, _ := listenURLs("http", ln.Addr())
	return listen + "/metrics", func(ctx context.Context) {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}, nil
}

// inProcessBridgeMetrics returns the Registerer rap serve gives the tool
// servers it runs in process (otc_server, tools_json and MCP entries), so
// that their gorap_toolserver_* metrics are on serve's /metrics, labelled
// by toolset and tool name and outcome like a bridge's own. Servers share
// the metric vectors; when two of them have the same toolset name, the
// second's gauges (callbacks queued, subscriptions active) are left out
// with a warning instead of failing the start.
func inProcessBridgeMetrics(reg prometheus.Registerer, log *slog.Logger) prometheus.Registerer {
	return bridgeRegisterer{next: reg, log: log}
}

// bridgeRegisterer is inProcessBridgeMetrics's Registerer.
type bridgeRegisterer struct {
	next prometheus.Registerer
	log  *slog.Logger
}

// Register implements prometheus.Registerer: a vector already registered
// is reported as such (the tool server then shares it); another
// collector already registered is skipped.
func (r bridgeRegisterer) Register(c prometheus.Collector) error {
	err := r.next.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		switch c.(type) {
		case *prometheus.CounterVec, *prometheus.HistogramVec, *prometheus.GaugeVec:
			return err
		}
		r.log.Warn("metrics: a bridged tool server's gauge is left out: another has the same toolset name", "err", err)
		return nil
	}
	return err
}

// MustRegister implements prometheus.Registerer.
func (r bridgeRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r bridgeRegisterer) Unregister(c prometheus.Collector) bool { return r.next.Unregister(c) }
