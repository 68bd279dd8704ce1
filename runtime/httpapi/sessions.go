package httpapi

// This file owns the client API's route that deletes a whole session:
// DELETE /v1/threads/{id}.

import (
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// serveDeleteSession answers DELETE /v1/threads/{id}: it deletes the
// session whose root thread is {id} (Engine.DeleteSession) and answers 200
// with {"deleted_threads": N}; 404 for an unknown session (or one the
// caller may not see, or deleted already), 400 for the id of a child
// thread, 409 for a session being moved to another runtime.
func (s *server) serveDeleteSession(w http.ResponseWriter, req *http.Request) {
	n, err := s.e.DeleteSession(req.Context(), req.PathValue("id"))
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DeleteSessionResponse{DeletedThreads: n})
}
