package httpapi

// This file owns the routes of moving a session between runtimes
// (docs/migration.md): the client's request to the source, the
// destination's steps the source drives, and the 308 answer for a
// session that moved away.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/runtime/api"
)

// SessionMover is implemented by an Engine that moves sessions between
// runtimes; New serves the move routes for such an Engine, and answers
// requests for a session that moved away with 308 Permanent Redirect.
type SessionMover interface {
	// MoveSession moves a session to another runtime (the source's side).
	MoveSession(ctx context.Context, root string, req api.MoveRequest) (api.MoveResponse, error)
	// PrepareMove, CommitMove, AbortMove and MoveStatus are the
	// destination's side of a move.
	PrepareMove(ctx context.Context, p api.MovePrepare) (api.MovePrepared, error)
	CommitMove(ctx context.Context, root, id, secret string, body io.Reader) (api.MoveState, error)
	AbortMove(ctx context.Context, root, id, secret string) (api.MoveState, error)
	MoveStatus(ctx context.Context, root, id, secret string) (api.MoveState, error)
	// MovedTo returns the base URL of the runtime the session of
	// threadID moved to, if it moved away from this one.
	MovedTo(threadID string) (string, bool)
}

// moveTimeout bounds the answer to a client's move request.
const moveTimeout = 10 * time.Minute

func (s *server) routeMoves(mux *http.ServeMux, m SessionMover) {
	mux.HandleFunc("POST /v1/threads/{id}/migrate", func(w http.ResponseWriter, req *http.Request) {
		var body api.MoveRequest
		if err := readJSON(w, req, &body); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		// A move runs to its end (or its undoing) even if the client
		// goes: stopping halfway is what the journal is for, not a
		// dropped connection.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), moveTimeout)
		defer cancel()
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(moveTimeout + time.Minute))
		resp, err := m.MoveSession(ctx, req.PathValue("id"), body)
		if err != nil {
			s.writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("POST /v1/migrations", func(w http.ResponseWriter, req *http.Request) {
		var body api.MovePrepare
		if err := readJSON(w, req, &body); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		prep, err := m.PrepareMove(req.Context(), body)
		if err != nil {
			s.writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, prep)
	})
	step := func(w http.ResponseWriter, req *http.Request, fn func(ctx context.Context, root, id, secret string) (api.MoveState, error)) {
		secret, ok := bearer.FromRequest(req)
		if !ok || secret == "" {
			writeError(w, http.StatusUnauthorized, "a move's step carries the move's secret as its bearer token")
			return
		}
		st, err := fn(req.Context(), req.PathValue("session"), req.PathValue("id"), secret)
		if err != nil {
			s.writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
	mux.HandleFunc("POST "+MovePath+"{session}/{id}/commit", func(w http.ResponseWriter, req *http.Request) {
		req.Body = http.MaxBytesReader(w, req.Body, s.opts.MaxImportBytes)
		step(w, req, func(ctx context.Context, root, id, secret string) (api.MoveState, error) {
			return m.CommitMove(ctx, root, id, secret, req.Body)
		})
	})
	mux.HandleFunc("POST "+MovePath+"{session}/{id}/abort", func(w http.ResponseWriter, req *http.Request) {
		step(w, req, m.AbortMove)
	})
	mux.HandleFunc("POST "+MovePath+"{session}/{id}/status", func(w http.ResponseWriter, req *http.Request) {
		step(w, req, m.MoveStatus)
	})
}

// movedGate answers a client API request for a thread of a session that
// moved away with 308 Permanent Redirect to the same path at the
// session's new runtime, and a body saying so.
func movedGate(m SessionMover, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rest, ok := strings.CutPrefix(req.URL.Path, "/v1/threads/")
		if ok {
			id, _, _ := strings.Cut(rest, "/")
			if to, moved := m.MovedTo(id); moved && id != "" {
				loc := to + req.URL.EscapedPath()
				if req.URL.RawQuery != "" {
					loc += "?" + req.URL.RawQuery
				}
				w.Header().Set("Location", loc)
				writeJSON(w, http.StatusPermanentRedirect, api.MovedResponse{Error: "moved", MovedTo: to + "/v1/threads/" + id})
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}
