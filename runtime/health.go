package runtime

// This file owns the health endpoints a load balancer or an orchestrator
// probes: GET /healthz answers 200 while the process
// serves HTTP at all (liveness), GET /readyz answers 200 only when the
// runtime has started, is not shutting down, and its store answers
// (readiness), 503 otherwise. Neither needs the client token, and neither
// says more than "ok" or a short reason.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// Paths of the health endpoints.
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
)

// readyTimeout bounds the store check of one readiness probe.
const readyTimeout = 2 * time.Second

// Errors Ready returns.
var (
	ErrNotStarted   = errors.New("the runtime has not started yet")
	ErrShuttingDown = errors.New("the runtime is shutting down")
	ErrStoreDown    = errors.New("the store does not answer")
)

// Ready reports whether the runtime takes work: nil once Start has run,
// until Shutdown begins, while the store answers a (read-only, empty)
// transaction within a couple of seconds.
func (r *Runtime) Ready(ctx context.Context) error {
	r.mu.Lock()
	started, stopping := r.started, r.stopping
	r.mu.Unlock()
	switch {
	case stopping:
		return ErrShuttingDown
	case !started:
		return ErrNotStarted
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := r.store.View(ctx, func(store.Tx) error { return nil }); err != nil {
		r.log.Warn("readiness: the store does not answer", "err", err)
		return ErrStoreDown
	}
	return nil
}

// WithHealth serves the health endpoints (HealthzPath, ReadyzPath) and
// hands every other request to next. Mount it outside any authentication:
// probes carry no token, and the answers say nothing about threads.
func (r *Runtime) WithHealth(next http.Handler) http.Handler {
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
