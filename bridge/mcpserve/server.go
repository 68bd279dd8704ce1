// Package mcpserve serves the tools of RAP tool servers as an MCP (Model
// Context Protocol) server, so that MCP hosts (Claude Desktop, IDEs, any
// MCP client) can call them: the reverse of package bridge/mcp.
//
// A Server discovers the toolsets of the RAP tool servers it is given
// (RAP TS-4, TS-5, TS-6) and adds each tool to an MCP server of the
// official MCP Go SDK (name, description, input schema, hints). An MCP
// tools/call becomes a RAP invocation whose callback URL lies on a
// loopback listener of the Server's own (a raptest.Runtime: an
// unguessable token per call); the handler waits for the tool_result,
// sending MCP progress notifications meanwhile, and returns it as MCP
// content. A cancelled MCP request sends RAP /cancel_tool_call; a
// user_choice becomes an MCP elicitation; an oauth link becomes a
// URL-mode elicitation. A client of protocol 2025-11-25 may run a call
// as an MCP task instead (tasks.go): the call returns a task at once and
// the client polls it. docs/mcp.md ("RAP tools in MCP hosts") has the
// whole mapping.
//
// The MCP server speaks the protocol versions of the handshake era
// (2024-11-05 to 2025-11-25), in which a server may send requests
// (elicitation) while a call runs.
package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of Options.
const (
	// DefaultCallTimeout is Options.CallTimeout when zero: how long one MCP
	// tools/call may wait for the RAP tool's result.
	DefaultCallTimeout = 10 * time.Minute
	// DefaultProgressInterval is Options.ProgressInterval when zero.
	DefaultProgressInterval = 5 * time.Second
	// DefaultTaskTimeout is Options.TaskTimeout when zero: how long a call
	// the client runs as an MCP task may wait for the RAP tool's result.
	DefaultTaskTimeout = time.Hour
	// DefaultDiscoveryTimeout bounds the discovery of one tool server.
	DefaultDiscoveryTimeout = 30 * time.Second
	// lateResultGrace is how long the callback URL of a call that ended
	// early (cancelled, timed out) keeps accepting callbacks, so that the
	// tool's late result is taken quietly instead of refused.
	lateResultGrace = 30 * time.Second
)

// protocolVersions are the MCP versions the server speaks: those of the
// initialize handshake. 2026-07-28, which the MCP Go SDK also speaks, is
// left out: in it a server may no longer send requests while a call runs
// (the SDK refuses ServerSession.Elicit; questions become multi
// round-trip results, which would re-send the RAP invocation), resource
// subscriptions go through subscriptions/listen, and tasks are no longer
// in the core protocol (they moved to an extension of another shape).
// Offering it breaks user choices, sign-in links and subscriptions for
// every client that prefers it, the Go SDK's among them; clients fall
// back to 2025-11-25.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Options configure a Server.
type Options struct {
	// ServerURLs are the base URLs of the RAP tool servers whose tools are
	// served (discovery appends /.well-known/rap-toolset, RAP TS-4).
	ServerURLs []string
	// ToolToken is the bearer token sent to the tool servers with every
	// discovery, invocation, cancellation and user-choice answer (RAP TR-8).
	ToolToken string
	// CallbackListen is the address of the listener that receives the
	// tools' callbacks; default "127.0.0.1:0". A tool server on another
	// machine needs an address it can reach.
	CallbackListen string
	// CallTimeout bounds one call: when the tool has sent no result after
	// it, the call is cancelled (RAP /cancel_tool_call) and the MCP result
	// is an error saying so. Default DefaultCallTimeout.
	CallTimeout time.Duration
	// TaskTimeout bounds a call the client runs as an MCP task (a
	// task-augmented tools/call, protocol version 2025-11-25) as
	// CallTimeout bounds the others. Default DefaultTaskTimeout.
	TaskTimeout time.Duration
	// ProgressInterval is how often a waiting call tells a client that
	// gave a progress token that it is still waiting, when the tool sends
	// nothing itself. Default DefaultProgressInterval; negative: never.
	ProgressInterval time.Duration
	// UserID, when set, is sent as every invocation's user_id.
	UserID string
	// Name and Version identify the MCP server to clients; default
	// "gorap" and "dev".
	Name, Version string
	// Logger receives the server's log; default discards. Callback URLs
	// and tokens are never logged.
	Logger *slog.Logger
	// HTTPClient, when set, reaches the tool servers (default: one with a
	// 30-second timeout). ToolToken is added to it.
	HTTPClient *http.Client
}

// Server serves the tools of RAP tool servers over MCP. Create one with
// New, serve it with RunStdio or HTTPHandler, and Close it when done.
type Server struct {
	opts    Options
	log     *slog.Logger
	rt      *raptest.Runtime
	tools   []*exposedTool
	skipped []string
	mcp     *mcp.Server
	subs    *subscriptions
	tasks   *taskStore

	mu      sync.Mutex
	threads map[*mcp.ServerSession]string // the RAP group_id of each MCP session
	closed  bool
	wg      sync.WaitGroup // session watchers and calls' late results
}

// exposedTool is one RAP tool served as an MCP tool.
type exposedTool struct {
	baseURL string // the tool server's base URL
	tool    *rap.ResolvedTool
	mcp     *mcp.Tool
}

// New starts the callback listener, discovers the toolsets of
// opts.ServerURLs and builds the MCP server. A tool server whose
// discovery fails, a toolset that fails validation, and tools that cannot
// be served (name conflicts, RAP TS-6; names or schemas MCP refuses) are
// left out and listed by Skipped; New fails only when no tool remains.
func New(ctx context.Context, opts Options) (*Server, error) {
	if len(opts.ServerURLs) == 0 {
		return nil, errors.New("mcpserve: no tool server URLs given")
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.TaskTimeout <= 0 {
		opts.TaskTimeout = DefaultTaskTimeout
	}
	if opts.ProgressInterval == 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	if opts.CallbackListen == "" {
		opts.CallbackListen = "127.0.0.1:0"
	}
	if opts.Name == "" {
		opts.Name = "gorap"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rtOpts := []raptest.Option{raptest.WithAddr(opts.CallbackListen), raptest.WithLogger(log), raptest.WithMaxCallbackBytes(rap.MaxCallbackBytes)}
	if opts.ToolToken != "" {
		rtOpts = append(rtOpts, raptest.WithBearerToken(opts.ToolToken))
	}
	if opts.HTTPClient != nil {
		rtOpts = append(rtOpts, raptest.WithHTTPClient(opts.HTTPClient))
	}
	rt, err := raptest.Start(rtOpts...)
	if err != nil {
		return nil, fmt.Errorf("mcpserve: %w", withoutRaptestPrefix(err))
	}
	s := &Server{opts: opts, log: log, rt: rt, threads: map[*mcp.ServerSession]string{}}
	s.subs = newSubscriptions(s)
	s.tasks = newTaskStore(s)
	if err := s.discover(ctx); err != nil {
		rt.Close()
		return nil, err
	}
	s.mcp = s.newMCPServer()
	if len(s.tools) == 0 {
		rt.Close()
		return nil, fmt.Errorf("mcpserve: no tool to serve: %s", strings.Join(s.skipped, "; "))
	}
	return s, nil
}

// discover fetches every toolset and keeps the tools that can be served.
func (s *Server) discover(ctx context.Context) error {
	type found struct {
		base string
		ts   *rap.Toolset
		err  error
	}
	results := make([]found, len(s.opts.ServerURLs))
	var wg sync.WaitGroup
	for i, u := range s.opts.ServerURLs {
		base := strings.TrimRight(u, "/")
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, DefaultDiscoveryTimeout)
			defer cancel()
			ts, err := s.rt.Discover(dctx, base)
			results[i] = found{base, ts, withoutRaptestPrefix(err)}
		})
	}
	wg.Wait()
	var sets []*rap.Toolset
	var bases []string
	for _, f := range results {
		if f.err != nil {
			s.skip(fmt.Sprintf("tool server %s: %v", f.base, f.err))
			continue
		}
		sets = append(sets, f.ts)
		bases = append(bases, f.base)
	}
	cat, errs := rap.NewCatalog(sets)
	for _, e := range errs {
		s.skip(e.Error())
	}
	for i, ts := range sets {
		for _, t := range ts.Tools {
			rt, ok := cat.Lookup(t.Name)
			if !ok || rt.Toolset != ts.Name || rt.Endpoint != ts.Endpoint {
				continue // a conflict, reported above
			}
			mt, problem := mcpTool(rt)
			if problem != "" {
				s.skip(fmt.Sprintf("tool %q of toolset %q: %s", t.Name, ts.Name, problem))
				continue
			}
			e := &exposedTool{baseURL: bases[i], tool: rt, mcp: mt}
			s.tools = append(s.tools, e)
		}
	}
	for _, p := range s.skipped {
		s.log.Warn("mcpserve: left out", "problem", p)
	}
	if len(s.tools) == 0 {
		return fmt.Errorf("mcpserve: no tool to serve: %s", strings.Join(s.skipped, "; "))
	}
	return nil
}

func (s *Server) skip(problem string) { s.skipped = append(s.skipped, problem) }

// newMCPServer builds the MCP server with every exposed tool.
func (s *Server) newMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: s.opts.Name, Version: s.opts.Version}, &mcp.ServerOptions{
		Logger: quieter(s.log, slog.LevelWarn),
		// Subscription tools add resources as they are called (subscribe.go).
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{},
			Resources: &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
		},
		SupportedProtocolVersions: protocolVersions,
		SubscribeHandler:          s.subs.subscribe,
		UnsubscribeHandler:        s.subs.unsubscribe,
	})
	kept := s.tools[:0]
	for _, e := range s.tools {
		if problem := addTool(srv, e.mcp, s.handler(e)); problem != "" {
			s.skip(fmt.Sprintf("tool %q of toolset %q: the MCP SDK refused it: %s", e.tool.Tool.Name, e.tool.Toolset, problem))
			s.log.Warn("mcpserve: left out", "problem", s.skipped[len(s.skipped)-1])
			continue
		}
		kept = append(kept, e)
	}
	s.tools = kept
	s.subs.register(srv)
	s.tasks.register(srv)
	return srv
}

// addTool adds a tool to srv and returns "", or what the MCP SDK found
// wrong with it: the SDK panics on a tool it cannot serve, and one odd
// tool must not stop the others.
func addTool(srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (problem string) {
	defer func() {
		if r := recover(); r != nil {
			problem = fmt.Sprint(r)
		}
	}()
	srv.AddTool(t, h)
	return ""
}

// tool returns the exposed tool called name, or nil.
func (s *Server) tool(name string) *exposedTool {
	for _, e := range s.tools {
		if e.tool.Tool.Name == name {
			return e
		}
	}
	return nil
}

// Tools returns the names of the tools served, sorted.
func (s *Server) Tools() []string {
	names := make([]string, len(s.tools))
	for i, e := range s.tools {
		names[i] = e.tool.Tool.Name
	}
	sort.Strings(names)
	return names
}

// Skipped describes what discovery left out: tool servers that could not
// be discovered, invalid toolsets, conflicting names, tools MCP refuses.
func (s *Server) Skipped() []string { return append([]string(nil), s.skipped...) }

// MCPServer returns the MCP server, for a transport of the caller's own
// (tests use in-memory transports).
func (s *Server) MCPServer() *mcp.Server { return s.mcp }

// CallbackURL returns the base URL of the callback listener.
func (s *Server) CallbackURL() string { return s.rt.URL() }

// RunStdio serves one MCP session on standard input and output until the
// client closes it or ctx ends (which is no error), then closes the
// Server.
func (s *Server) RunStdio(ctx context.Context) error {
	// Calls in flight end when ctx does: the SDK waits for them before it
	// closes the session.
	stop := context.AfterFunc(ctx, s.Close)
	defer stop()
	err := s.mcp.Run(ctx, TaskTransport(&mcp.StdioTransport{}))
	s.Close()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// thread returns the RAP group_id of an MCP session, making one up on
// its first call: one thread per session, so that tools keep what they
// keep per conversation. When the session ends, the thread is closed at
// the tool servers (RAP TC-1), so that they free it.
func (s *Server) thread(ss *mcp.ServerSession) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.threads[ss]
	if !ok {
		id = "mcp_" + randomHex(12)
		s.threads[ss] = id
		if !s.closed {
			s.wg.Go(func() {
				_ = ss.Wait()
				s.sessionEnded(ss)
			})
		}
	}
	return id
}

// sessionEnded ends the session's subscriptions and closes its thread at
// every tool server.
func (s *Server) sessionEnded(ss *mcp.ServerSession) {
	s.mu.Lock()
	id, ok := s.threads[ss]
	delete(s.threads, ss)
	s.mu.Unlock()
	s.subs.sessionEnded(ss)
	s.tasks.sessionEnded(ss)
	if !ok {
		return
	}
	s.closeThread(id)
}

// closeThread POSTs /close_thread for thread id to every tool server.
func (s *Server) closeThread(id string) {
	seen := map[string]bool{}
	for _, e := range s.tools {
		if seen[e.baseURL] {
			continue
		}
		seen[e.baseURL] = true
		ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
		if err := s.rt.CloseThread(ctx, e.baseURL, id); err != nil {
			s.log.Info("mcpserve: /close_thread failed", "server", e.baseURL, "err", withoutRaptestPrefix(err))
		}
		cancel()
	}
}

// Close ends every call in flight (each gets an error result and RAP
// /cancel_tool_call), every subscription and every MCP session, closes
// the sessions' threads at the tool servers (RAP TC-1) and stops the
// callback listener.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.subs.closeAll()
	s.rt.Close() // wakes every waiting call with raptest.ErrClosed
	for ss := range s.mcp.Sessions() {
		_ = ss.Close() // its watcher closes its thread
	}
	s.wg.Wait()
}

// withoutRaptestPrefix drops the "raptest: " the runtime library puts
// before its errors: the user runs an MCP server, not raptest.
func withoutRaptestPrefix(err error) error {
	if err == nil {
		return nil
	}
	if msg, ok := strings.CutPrefix(err.Error(), "raptest: "); ok {
		return errors.New(msg)
	}
	return err
}

// quieter returns a logger that passes on only records at level min and
// above: the MCP SDK logs every session and request at Info.
func quieter(l *slog.Logger, min slog.Level) *slog.Logger {
	return slog.New(minLevel{l.Handler(), min})
}

// minLevel is a slog.Handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
