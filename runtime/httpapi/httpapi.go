// Package httpapi serves the runtime over HTTP: the client API under /v1
// (docs/api.md) with its event stream, the callback endpoint tools post
// to, the browser checks and client authentication in front of them, the
// health endpoints and the HTTP server's limits. It does not import the
// runtime: it drives an Engine, the runtime's exported Go API, so that a Go
// program embedding the runtime can do whatever the HTTP API does.
package httpapi

// This file owns the Engine the handlers drive, the Options, New (the
// routes behind the browser checks and the client-auth gate) and the
// answers every handler writes.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// Engine is what the HTTP surface needs of the runtime; *runtime.Runtime
// implements it. Every thread method answers for the api.Caller of its
// context: a thread of another user is api.ErrUnknownThread.
type Engine interface {
	// CreateSession creates a root thread for userID ("" is the
	// runtime's default user) and returns its id and toolsets.
	CreateSession(ctx context.Context, userID string) (api.CreateThreadResponse, error)
	// ThreadsPage returns up to limit threads after cursor, the children
	// of parentID when it is not "".
	ThreadsPage(ctx context.Context, parentID, cursor string, limit int) (api.ThreadPage, error)
	// CheckThread returns nil when the thread exists and ctx's Caller may
	// see it, else an error wrapping api.ErrUnknownThread.
	CheckThread(ctx context.Context, threadID string) error
	// ThreadInfo returns the thread's state.
	ThreadInfo(ctx context.Context, threadID string) (api.ThreadInfo, error)
	// PostMessageWithKey queues a user message; a repeated non-empty
	// idempotencyKey adds nothing and reports added=false.
	PostMessageWithKey(ctx context.Context, threadID, text, idempotencyKey string) (added bool, err error)
	// History returns the thread's messages.
	History(ctx context.Context, threadID string) ([]api.Message, error)
	// CloseThread closes the thread.
	CloseThread(ctx context.Context, threadID string) error
	// DeleteSession deletes the session whose root thread is rootID and
	// reports how many threads it removed; a child's id wraps
	// api.ErrBadInput, a moving session api.ErrSessionMoving.
	DeleteSession(ctx context.Context, rootID string) (int, error)
	// UserThreadsPage is ThreadsPage for the threads of one user's
	// sessions.
	UserThreadsPage(ctx context.Context, userID, cursor string, limit int) (api.ThreadPage, error)
	// PendingChoices returns the user choices waiting for an answer.
	PendingChoices(ctx context.Context, threadID string) ([]api.Choice, error)
	// AnswerChoice answers a user choice (nil selected dismisses it) and
	// returns the index sent.
	AnswerChoice(ctx context.Context, threadID, callID string, selected *int) (int, error)
	// PendingInputs returns the user inputs waiting for an answer.
	PendingInputs(ctx context.Context, threadID string) ([]api.Input, error)
	// AnswerInput answers a user input with values, or dismisses it.
	AnswerInput(ctx context.Context, threadID, callID string, values map[string]json.RawMessage, dismiss bool) error
	// FollowEvents opens a stream of the thread's events for a client
	// that last saw lastEventID ("" for none).
	FollowEvents(ctx context.Context, threadID, lastEventID string) (api.EventStream, error)
	// DeliverCallback checks the token of a callback URL, and only when
	// it is valid reads and applies the callback body a tool sent.
	DeliverCallback(ctx context.Context, token string, body io.Reader, idempotencyKey string) api.CallbackResult
}

// Options configure New. The zero value (or nil) answers the client API
// to this machine only, under the host names localhost and loopback
// addresses.
type Options struct {
	// Log receives the handlers' logs; nil means slog.Default().
	Log *slog.Logger
	// PublicURL is the runtime's base URL; its host is an allowed host.
	PublicURL string
	// AllowedHosts and AllowedOrigins are the host names and page origins
	// the browser checks allow beside loopback (see WebGuard).
	AllowedHosts   []string
	AllowedOrigins []string
	// ClientAuth, when set, guards the client API: it authenticates a
	// request and sets its api.Caller, or answers it itself.
	ClientAuth func(next http.Handler) http.Handler
	// InsecureClientAPI, when true and ClientAuth is nil, serves the
	// client API to every address; without either only loopback
	// addresses are answered.
	InsecureClientAPI bool
	// StreamWriteTimeout bounds each write of an event to a stream's
	// client; default 30 s.
	StreamWriteTimeout time.Duration
	// MaxImportBytes bounds the body of POST /v1/import; zero means
	// DefaultMaxImportBytes.
	MaxImportBytes int64
	// Metrics, when set, is served at GET MetricsPath behind the client
	// API's authentication (ClientAuth, or loopback only), to callers
	// not bound to one user (403 otherwise).
	Metrics http.Handler
}

// DefaultMaxImportBytes is Options.MaxImportBytes' default: 1 GiB.
const DefaultMaxImportBytes = 1 << 30

// DefaultStreamWriteTimeout is Options.StreamWriteTimeout's default.
const DefaultStreamWriteTimeout = 30 * time.Second

// withDefaults returns a copy of o (nil: the zero Options) with defaults
// filled in; o itself is never changed.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if c.MaxImportBytes <= 0 {
		c.MaxImportBytes = DefaultMaxImportBytes
	}
	c.AllowedHosts = append([]string(nil), c.AllowedHosts...)
	c.AllowedOrigins = append([]string(nil), c.AllowedOrigins...)
	return c
}

// server holds what the handlers share.
type server struct {
	e    Engine
	opts Options
}

// New returns the runtime's HTTP handler for e: the client API under /v1
// and the callback endpoint under CallbackPath (see docs/api.md). The
// client API refuses what web pages could send it (see WebGuard), and is
// guarded by opts.ClientAuth, or without it answers loopback addresses
// only (see Options.InsecureClientAPI). A nil opts takes the defaults.
func New(e Engine, opts *Options) http.Handler {
	s := &server{e: e, opts: opts.withDefaults()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/threads", s.serveCreateThread)
	mux.HandleFunc("GET /v1/threads", s.serveListThreads)
	mux.HandleFunc("GET /v1/threads/{id}", s.serveThread)
	mux.HandleFunc("POST /v1/threads/{id}/messages", s.owned(s.servePostMessage))
	mux.HandleFunc("GET /v1/threads/{id}/messages", s.serveHistory)
	mux.HandleFunc("GET /v1/threads/{id}/events", s.serveEvents)
	mux.HandleFunc("POST /v1/threads/{id}/close", s.serveClose)
	mux.HandleFunc("DELETE /v1/threads/{id}", s.serveDeleteSession) // sessions.go
	mux.HandleFunc("GET /v1/threads/{id}/choices", s.serveChoices)
	mux.HandleFunc("POST /v1/threads/{id}/choices/{call_id}", s.owned(s.serveAnswerChoice))
	mux.HandleFunc("GET /v1/threads/{id}/inputs", s.serveInputs)
	mux.HandleFunc("POST /v1/threads/{id}/inputs/{call_id}", s.owned(s.serveAnswerInput))
	mux.HandleFunc("POST "+CallbackPath+"{token}", s.serveCallback)
	if a, ok := e.(SessionArchiver); ok {
		s.routeArchives(mux, a)
	}
	if c, ok := e.(Compactor); ok {
		s.routeCompaction(mux, c)
	}
	if o, ok := e.(Organizer); ok {
		s.routeOrganizer(mux, o) // organize.go
	}
	s.routeRemotes(mux, e) // remotes.go
	if l, ok := e.(WaitLister); ok {
		s.routeWaiting(mux, l) // waiting.go
	}
	if s.opts.Metrics != nil {
		mux.HandleFunc("GET "+MetricsPath, s.serveMetrics) // metrics.go
	}
	var h http.Handler = mux
	if m, ok := e.(SessionMover); ok {
		s.routeMoves(mux, m)
		h = movedGate(m, mux)
	}
	return webGuard(&s.opts, s.clientAuth(h))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// writeEngineError maps the engine's errors to HTTP answers.
func (s *server) writeEngineError(w http.ResponseWriter, err error) {
	var moved *api.MovedError
	switch {
	case errors.Is(err, api.ErrUnknownThread), errors.Is(err, api.ErrNoChoice), errors.Is(err, api.ErrNoInput):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, api.ErrChoiceDelivery):
		writeError(w, http.StatusBadGateway, err.Error())
	case errors.Is(err, api.ErrBadInput):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, api.ErrNotAllowed):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, api.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, api.ErrMoveUndecided):
		writeError(w, http.StatusGatewayTimeout, err.Error())
	case errors.Is(err, api.ErrModelFailed):
		writeError(w, http.StatusBadGateway, err.Error())
	case errors.Is(err, api.ErrMoveFailed):
		writeError(w, http.StatusBadGateway, err.Error())
	case errors.Is(err, api.ErrMoving):
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.As(err, &moved):
		w.Header().Set("Location", moved.To+"/v1/threads/"+moved.Session)
		writeJSON(w, http.StatusPermanentRedirect, api.MovedResponse{Error: "moved", MovedTo: moved.To + "/v1/threads/" + moved.Session})
	default:
		s.opts.Log.Error("client API request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error; see the runtime log")
	}
}

// owned wraps a handler of a route with a thread {id} whose request has a
// body: a caller bound to a user gets 404, as for a thread that does not
// exist, when the thread belongs to another user's session, before the
// body is read. Bodyless routes need no such check: the Engine's methods
// answer for the Caller themselves, in the same read.
func (s *server) owned(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if _, scoped := api.ScopedUser(req.Context()); !scoped {
			h(w, req)
			return
		}
		if err := s.e.CheckThread(req.Context(), req.PathValue("id")); err != nil {
			s.writeEngineError(w, err)
			return
		}
		h(w, req)
	}
}
