package runtime

// This file owns readiness: Ready answers 200 on GET /readyz (served by
// runtime/httpapi, WithHealth) only when the runtime has started, is not
// shutting down, and its store answers.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorap/gorap/runtime/httpapi"
	"github.com/gorap/gorap/runtime/store"
)

// Paths of the health endpoints.
const (
	HealthzPath = httpapi.HealthzPath
	ReadyzPath  = httpapi.ReadyzPath
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

// WithHealth serves the health endpoints (HealthzPath, ReadyzPath, see
// Ready) and hands every other request to next; it is
// httpapi.WithHealth(r, next). Mount it outside any authentication: probes
// carry no token, and the answers say nothing about threads.
func (r *Runtime) WithHealth(next http.Handler) http.Handler {
	return httpapi.WithHealth(r, next)
}
