package httpapi

// This file owns the health endpoints a load balancer or an orchestrator
// probes: GET /healthz answers 200 while the process serves HTTP at all
// (liveness), GET /readyz answers 200 only while the engine says it is
// ready (readiness), 503 otherwise. Neither needs the client token, and
// neither says more than "ok" or a short reason.

import (
	"context"
	"net/http"
)

// Paths of the health endpoints.
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
)

// Readiness is what the readiness probe asks; *runtime.Runtime
// implements it.
type Readiness interface {
	// Ready returns nil while the engine takes work, else why not.
	Ready(ctx context.Context) error
}

// WithHealth serves the health endpoints (HealthzPath, ReadyzPath) for r
// and hands every other request to next. Mount it outside any
// authentication: probes carry no token, and the answers say nothing about
// threads.
func WithHealth(r Readiness, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case HealthzPath:
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		case ReadyzPath:
			w.Header().Set("Cache-Control", "no-store")
			if err := r.Ready(req.Context()); err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		default:
			next.ServeHTTP(w, req)
		}
	})
}
