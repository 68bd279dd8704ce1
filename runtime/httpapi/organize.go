package httpapi

// This file owns what organizes a person's sessions: the search (q=) and
// archived filter (archived=) of GET /v1/threads, and PATCH
// /v1/threads/{id}, which renames and archives a session.

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// Organizer is implemented by an Engine that keeps sessions' titles and
// archives sessions; New then lists threads through FindThreads, which
// takes GET /v1/threads's q= and archived=, and serves PATCH
// /v1/threads/{id}. *runtime.Runtime implements it.
type Organizer interface {
	// FindThreads returns the page of threads q selects.
	FindThreads(ctx context.Context, q api.ThreadQuery) (api.ThreadPage, error)
	// UpdateThread changes the title or archived flag of the session
	// whose root thread is threadID and returns that thread.
	UpdateThread(ctx context.Context, threadID string, req api.UpdateThreadRequest) (api.Thread, error)
}

// routeOrganizer serves PATCH /v1/threads/{id} for o.
func (s *server) routeOrganizer(mux *http.ServeMux, o Organizer) {
	mux.HandleFunc("PATCH /v1/threads/{id}", s.owned(func(w http.ResponseWriter, req *http.Request) {
		var body api.UpdateThreadRequest
		if err := readJSON(w, req, &body); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		th, err := o.UpdateThread(req.Context(), req.PathValue("id"), body)
		if err != nil {
			s.writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, th)
	}))
}

// findThreads answers GET /v1/threads with every parameter, through the
// Engine's FindThreads; an Engine that is no Organizer lists every
// thread, and answers a request with q= or with archived= other than
// include 400, as it cannot honour them.
func (s *server) findThreads(req *http.Request, limit int) (api.ThreadPage, error) {
	q := req.URL.Query()
	query := api.ThreadQuery{ParentID: q.Get("parent_id"), UserID: q.Get("user_id"), Cursor: q.Get("cursor"), Limit: limit,
		Query: q.Get("q"), Archived: q.Get("archived")}
	if q.Has("user_id") {
		if query.UserID == "" {
			return api.ThreadPage{}, fmt.Errorf("%w: user_id is empty; name a user, or leave user_id out to list every thread", api.ErrBadInput)
		}
		if query.ParentID != "" {
			return api.ThreadPage{}, fmt.Errorf("%w: give parent_id or user_id, not both (a child belongs to its parent's user)", api.ErrBadInput)
		}
	}
	if o, ok := s.e.(Organizer); ok {
		return o.FindThreads(req.Context(), query)
	}
	if query.Query != "" || (query.Archived != "" && query.Archived != api.ArchivedInclude) {
		return api.ThreadPage{}, fmt.Errorf("%w: this runtime neither searches nor archives threads: leave q and archived out", api.ErrBadInput)
	}
	if query.UserID != "" {
		return s.e.UserThreadsPage(req.Context(), query.UserID, query.Cursor, limit)
	}
	return s.e.ThreadsPage(req.Context(), query.ParentID, query.Cursor, limit)
}
