package httpapi

// This file owns the routes that carry whole sessions as a session
// archive (runtime/archive): exporting one session or all, and importing
// an archive.

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// ArchiveContentType is the media type of a session archive.
const ArchiveContentType = "application/jsonl"

// SessionArchiver is implemented by an Engine that exports and imports
// sessions; New serves GET /v1/threads/{id}/export, GET /v1/export
// (every session, or those of its session parameters) and POST /v1/import
// for such an Engine.
type SessionArchiver interface {
	// ExportSessions writes an archive of the sessions of roots, or of
	// every session the Caller may see when roots is empty, to w.
	ExportSessions(ctx context.Context, w io.Writer, roots []string) (int, error)
	// ImportSessions imports the sessions of the archive rd and returns
	// the root ids imported, those before an error included.
	ImportSessions(ctx context.Context, rd io.Reader) ([]string, error)
}

func (s *server) routeArchives(mux *http.ServeMux, a SessionArchiver) {
	mux.HandleFunc("GET /v1/threads/{id}/export", func(w http.ResponseWriter, req *http.Request) {
		s.serveExport(w, req, a, []string{req.PathValue("id")})
	})
	mux.HandleFunc("GET /v1/export", func(w http.ResponseWriter, req *http.Request) {
		s.serveExport(w, req, a, req.URL.Query()["session"])
	})
	mux.HandleFunc("POST /v1/import", func(w http.ResponseWriter, req *http.Request) {
		s.serveImport(w, req, a)
	})
}

// headerWriter sets the archive's headers and status at its first write,
// so that an error found before anything was written still gets its own
// status.
type headerWriter struct {
	w       http.ResponseWriter
	started bool
}

func (h *headerWriter) Write(p []byte) (int, error) {
	if !h.started {
		h.started = true
		h.w.Header().Set("Content-Type", ArchiveContentType)
		h.w.Header().Set("Cache-Control", "no-store")
		h.w.WriteHeader(http.StatusOK)
	}
	return h.w.Write(p)
}

func (s *server) serveExport(w http.ResponseWriter, req *http.Request, a SessionArchiver, roots []string) {
	hw := &headerWriter{w: w}
	n, err := a.ExportSessions(req.Context(), hw, roots)
	if err == nil {
		return
	}
	if !hw.started {
		s.writeEngineError(w, err)
		return
	}
	// The archive is cut short: it has no end line, so every reader
	// knows. Nothing else can be said once the status is sent.
	s.opts.Log.Warn("export cut short", "sessions_written", n, "err", err)
}

// importAnswer is the body of POST /v1/import's answers.
type importAnswer struct {
	Imported []string `json:"imported"`
	Error    string   `json:"error,omitempty"`
}

func (s *server) serveImport(w http.ResponseWriter, req *http.Request, a SessionArchiver) {
	body := http.MaxBytesReader(w, req.Body, s.opts.MaxImportBytes)
	roots, err := a.ImportSessions(req.Context(), body)
	if roots == nil {
		roots = []string{}
	}
	if err == nil {
		writeJSON(w, http.StatusOK, importAnswer{Imported: roots})
		return
	}
	var mbe *http.MaxBytesError
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &mbe):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, api.ErrBadInput):
		status = http.StatusBadRequest
	case errors.Is(err, api.ErrNotAllowed):
		status = http.StatusForbidden
	case errors.Is(err, api.ErrConflict):
		status = http.StatusConflict
	default:
		s.opts.Log.Error("import failed", "imported", len(roots), "err", err)
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error; see the runtime log"
	}
	// The sessions imported before the error stay: the answer lists them.
	writeJSON(w, status, importAnswer{Imported: roots, Error: msg})
}
