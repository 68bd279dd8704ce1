package httpapi

// This file owns GET /v1/waiting: the threads waiting longest.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gorap/gorap/runtime/api"
)

// WaitLister is implemented by an Engine that lists the threads waiting
// longest; New then serves GET /v1/waiting. *runtime.Runtime implements
// it.
type WaitLister interface {
	// Waiting returns up to limit threads waiting longest, oldest first,
	// of the Caller of ctx's user when it is bound to one.
	Waiting(ctx context.Context, limit int) (api.WaitingResponse, error)
}

// routeWaiting serves GET /v1/waiting?limit=N (default
// api.DefaultWaitingLimit, at most api.MaxWaitingLimit) for l.
func (s *server) routeWaiting(mux *http.ServeMux, l WaitLister) {
	mux.HandleFunc("GET /v1/waiting", func(w http.ResponseWriter, req *http.Request) {
		limit := api.DefaultWaitingLimit
		if v := req.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a whole number from 1 to %d", v, api.MaxWaitingLimit))
				return
			}
			limit = min(n, api.MaxWaitingLimit)
		}
		resp, err := l.Waiting(req.Context(), limit)
		if err != nil {
			s.writeEngineError(w, err)
			return
		}
		if resp.Threads == nil {
			resp.Threads = []api.WaitingThread{}
		}
		writeJSON(w, http.StatusOK, resp)
	})
}
