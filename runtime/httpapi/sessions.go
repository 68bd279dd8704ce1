package httpapi

// This file owns the client API's routes on whole sessions: DELETE
// /v1/threads/{id} and the ?user_id= filter of GET /v1/threads.

import (
	"fmt"
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

// userThreadsPage answers GET /v1/threads?user_id=: a page of the threads
// of that user's sessions. It cannot be combined with ?parent_id=.
func (s *server) userThreadsPage(req *http.Request, user string, limit int) (api.ThreadPage, error) {
	q := req.URL.Query()
	if user == "" {
		return api.ThreadPage{}, fmt.Errorf("%w: user_id is empty; name a user, or leave user_id out to list every thread", api.ErrBadInput)
	}
	if q.Get("parent_id") != "" {
		return api.ThreadPage{}, fmt.Errorf("%w: give parent_id or user_id, not both (a child belongs to its parent's user)", api.ErrBadInput)
	}
	return s.e.UserThreadsPage(req.Context(), user, q.Get("cursor"), limit)
}
