package rap

// Synchronous calls and extra routes, for packages that serve a Server's
// tools over another protocol (bridge/otc serves them over OXP 1.0).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Errors of Server.Invoke.
var (
	// ErrNotStarted: Start has not completed.
	ErrNotStarted = errors.New("rap: tool server not started")
	// ErrBusy: every worker and queue slot is taken, or the server is
	// shutting down; try again later.
	ErrBusy = errors.New("rap: tool server busy: all workers and queue slots are taken")
	// ErrCallRunning: a call with the same group id and id is running.
	ErrCallRunning = errors.New("rap: a call with this group id and id is already running")
	// ErrUnknownOperation: the server has no tool of that name.
	ErrUnknownOperation = errors.New("rap: unknown operation")
	// ErrSubscriptionTool: the tool is a subscription tool, whose events
	// only a callback URL can receive.
	ErrSubscriptionTool = errors.New("rap: a subscription tool sends events over time and cannot be run synchronously")
)

// Invoke runs inv the way an invocation POSTed to /invoke runs, and
// returns its tool result instead of sending it to a callback URL: on one
// of the server's workers (it counts against Workers and Queue), recorded
// in the call journal while it runs, cancelled by /cancel_tool_call for
// inv.ID, /close_thread for inv.GroupID, Shutdown, or ctx ending (the
// handler's context.Cause is then ctx's), and waited for by Shutdown.
// inv.CallbackURL is ignored, so the handler's RequestOAuth, AskUser and
// UpdateView fail, and SaveState does nothing: a call cut off by a crash
// is not resumed, since its caller's connection is gone.
//
// inv needs Operation, GroupID and ID; nil Arguments mean {}. Before
// anything runs, Invoke returns ErrNotStarted, ErrUnknownOperation,
// ErrSubscriptionTool, an error wrapping *ArgumentsError for arguments
// that do not fit the tool's input schema, ErrCallRunning, ErrBusy, or
// the journal's error. Once the handler runs, its errors are in the
// result (an "Error: " text), as a callback would carry them; Invoke
// returns ctx's cause only when ctx ends before the result.
func (s *Server) Invoke(ctx context.Context, inv *Invocation) (*ToolResult, error) {
	if !s.started.Load() {
		return nil, ErrNotStarted
	}
	if inv == nil || inv.GroupID == "" || inv.ID == "" {
		return nil, errors.New("rap: Invoke: the invocation needs a group id and an id")
	}
	e, ok := s.lookup(inv.Operation)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q; toolset %q has: %s", ErrUnknownOperation, inv.Operation, s.name, strings.Join(s.toolNames(), ", "))
	case e.prepare != nil:
		return nil, fmt.Errorf("%w: %q", ErrSubscriptionTool, inv.Operation)
	}
	copied := *inv
	copied.CallbackURL = ""
	if len(copied.Arguments) == 0 || string(copied.Arguments) == "null" {
		copied.Arguments = []byte("{}")
	}
	if err := s.validateArgs(e.schema, copied.Arguments); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancelCause(s.baseCtx)
	if !s.register(copied.GroupID, copied.ID, cancel) {
		cancel(nil)
		return nil, ErrCallRunning
	}
	if !s.pool.reserve() {
		s.unregister(copied.GroupID, copied.ID)
		cancel(nil)
		return nil, ErrBusy
	}
	journaled, err := s.beginCall(ctx, &copied, traceContext{})
	if err != nil {
		s.unregister(copied.GroupID, copied.ID)
		s.pool.release()
		cancel(nil)
		return nil, fmt.Errorf("rap: Invoke: recording the call in the call journal: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	c := &Call{Invocation: &copied, srv: s, journaled: journaled, result: make(chan *ToolResult, 1)}
	s.attach(copied.GroupID, copied.ID, c)
	s.pool.submit(job{s: s, ctx: cctx, cancel: cancel, c: c})
	select {
	case r := <-c.result:
		return r, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// IsSubscription reports whether the server has a subscription tool
// (added with AddSubscription) named tool.
func (s *Server) IsSubscription(tool string) bool {
	e, ok := s.lookup(tool)
	return ok && e.prepare != nil
}

// Started reports whether Start has completed: the server serves
// invocations.
func (s *Server) Started() bool { return s.started.Load() }

// Authorized reports whether r carries the server's bearer token
// (ServerOptions.BearerToken), compared in constant time; it is true when
// no token is configured. Routes added with Handle check it themselves.
func (s *Server) Authorized(r *http.Request) bool { return s.authorized(r) }

// ReadBody reads r's body within the server's limits (MaxBodyBytes,
// MaxBodyBytesInFlight), for routes added with Handle. On failure it has
// already answered (413, 400, or 503 with Retry-After) and reports false.
func (s *Server) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	return s.readBody(w, r)
}

// Handle makes ServeHTTP serve h for requests to path (an exact path, such
// as "/tools"), for packages that serve the server's tools over another
// protocol (bridge/otc.ServeOXP). ServeHTTP refuses browser requests first,
// as for every route (see ServeHTTP); h checks methods and authentication
// itself (see Authorized and ReadBody). A later Handle of the same path
// replaces h. Handle panics on a path the server answers itself. It may be
// called while the server serves.
func (s *Server) Handle(path string, h http.Handler) {
	switch path {
	case WellKnownPath, "/", InvokePath, CloseThreadPath, CancelToolCallPath, MigratePath, ToolCallStatusPath, UserChoiceResponsePath, UserInputResponsePath:
		panic(fmt.Sprintf("rap: Handle: %q is a RAP route of the server", path))
	}
	if h == nil || !strings.HasPrefix(path, "/") {
		panic(fmt.Sprintf("rap: Handle: want a path starting with / and a handler, got %q and %v", path, h))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	routes := make(map[string]http.Handler, len(s.extraRoutes())+1)
	for p, hh := range s.extraRoutes() {
		routes[p] = hh
	}
	routes[path] = h
	s.routes.Store(&routes)
}

// extraRoutes returns the routes added with Handle.
func (s *Server) extraRoutes() map[string]http.Handler {
	if m := s.routes.Load(); m != nil {
		return *m
	}
	return nil
}
