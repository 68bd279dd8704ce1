package httpapi

// This file owns the route of compacting a thread on demand, and the
// interface through which the history shows its compactions.

import (
	"context"
	"net/http"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// Compactor is implemented by an Engine that compacts threads' histories
// in what the model sees; New then serves POST /v1/threads/{id}/compact,
// and GET /v1/threads/{id}/messages lists the thread's compactions.
type Compactor interface {
	// CompactThread compacts the thread now.
	CompactThread(ctx context.Context, threadID string) (api.Compaction, error)
	// Compactions lists the thread's compactions, oldest first.
	Compactions(ctx context.Context, threadID string) ([]api.Compaction, error)
}

// compactAnswerTimeout bounds the answer of POST /v1/threads/{id}/compact,
// which comes when the model has written the summary: longer than the
// model timeout that bounds that request by default (10 minutes), and so
// than the server's write timeout, which suits the immediate answers.
const compactAnswerTimeout = 15 * time.Minute

func (s *server) routeCompaction(mux *http.ServeMux, c Compactor) {
	mux.HandleFunc("POST /v1/threads/{id}/compact", s.owned(func(w http.ResponseWriter, req *http.Request) {
		var body struct{}
		if err := readJSON(w, req, &body); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(compactAnswerTimeout))
		comp, err := c.CompactThread(req.Context(), req.PathValue("id"))
		if err != nil {
			s.writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, comp)
	}))
}
