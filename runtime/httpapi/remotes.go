package httpapi

// This file owns the routes a client reads before and after moving a
// session: GET /v1/remotes (the runtimes it may name as a destination) and
// GET /v1/moved/{id} (where a session that moved away went).

import (
	"fmt"
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// RemoteLister is implemented by an Engine that may move sessions to
// runtimes it knows by name; New serves GET /v1/remotes for such an
// Engine.
type RemoteLister interface {
	// RemoteNames returns the names of the runtimes sessions may move to,
	// sorted, never their URLs or tokens.
	RemoteNames() []string
}

// routeRemotes serves GET /v1/remotes when e is a RemoteLister, and GET
// /v1/moved/{id} when it is a SessionMover.
func (s *server) routeRemotes(mux *http.ServeMux, e Engine) {
	if l, ok := e.(RemoteLister); ok {
		mux.HandleFunc("GET /v1/remotes", func(w http.ResponseWriter, req *http.Request) {
			// Only a caller that may move sessions learns where to: the
			// answer is also how a client asks whether it may.
			if _, scoped := api.ScopedUser(req.Context()); scoped {
				s.writeEngineError(w, api.ErrNotAllowed)
				return
			}
			names := l.RemoteNames()
			if names == nil {
				names = []string{}
			}
			writeJSON(w, http.StatusOK, api.RemotesResponse{Remotes: names})
		})
	}
	if m, ok := e.(SessionMover); ok {
		// Not under /v1/threads/, so not redirected: a web page learns
		// where a session went without following a redirect to another
		// origin, whose API wants its own token.
		mux.HandleFunc("GET /v1/moved/{id}", func(w http.ResponseWriter, req *http.Request) {
			id := req.PathValue("id")
			to, moved := m.MovedTo(id)
			if !moved || id == "" {
				writeError(w, http.StatusNotFound, fmt.Sprintf("thread %q did not move away from this runtime", id))
				return
			}
			writeJSON(w, http.StatusOK, api.MovedToResponse{MovedTo: to})
		})
	}
}
