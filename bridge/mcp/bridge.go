// Package mcp serves an MCP (Model Context Protocol) server as a RAP tool
// server: each MCP tool becomes a RAP tool, each RAP invocation becomes an
// MCP tools/call run in the background, MCP progress notifications become
// RAP view updates, multiple-choice form elicitations become RAP user
// choices, resource subscriptions become RAP subscriptions, and MCP
// tasks become ordinary asynchronous RAP calls that survive a restart of
// the bridge (tasks.go, taskconn.go).
//
// The MCP side is the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk) acting as a client over stdio
// (a command the bridge starts and supervises) or Streamable HTTP (a URL).
// The RAP side is gorap's own rap package: a *Bridge is an http.Handler
// that serves discovery, invocations, cancellation and thread closing
// exactly as any rap.Server does.
//
// See docs/mcp.md for the field-by-field mapping.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Mode values of Options.Mode.
const (
	// ModeDirect exposes every MCP tool as a RAP tool of its own.
	ModeDirect = "direct"
	// ModeProxy exposes two tools, {name}_list_tools and
	// {name}_invoke_tool (RAP CF-2), for servers with very many tools.
	ModeProxy = "proxy"
)

// Defaults of the restart backoff of a supervised MCP server.
const (
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultConnectTimeout bounds starting the MCP server and its
	// initialize handshake (see Options.ConnectTimeout and
	// DefaultLauncherConnectTimeout).
	DefaultConnectTimeout = 30 * time.Second
	// DefaultRestartWait bounds how long a call waits for a server that
	// is being restarted before it ends with an error result.
	DefaultRestartWait = 5 * time.Second
	// DefaultTerminateWait is the default of Options.TerminateWait.
	DefaultTerminateWait = 2 * time.Second
	// DefaultCallTimeout is the default of Options.CallTimeout: as long as
	// the OTC bridge waits for a worker call. A synchronous tools/call
	// has no other end: an MCP server that never answers would otherwise
	// leave the RAP call pending for ever, and the runtime's own
	// per-tool timeout is off by default. Five minutes is far beyond an
	// interactive tool's answer; a longer job should run as an MCP task
	// (bounded by TaskTimeout instead) or get a larger CallTimeout.
	DefaultCallTimeout = 5 * time.Minute
	// DefaultWorkers is the number of MCP calls the bridge runs at once;
	// further invocations wait in the rap server's queue.
	DefaultWorkers = 256
)

// Options configure a Bridge. Exactly one of Command and URL is set.
type Options struct {
	// Name names the MCP server in the RAP toolset, in log lines and in
	// error results; it is the toolset name. Required.
	Name string
	// Command is the stdio MCP server's program and arguments.
	Command []string
	// Env holds extra KEY=VALUE environment variables for Command, added
	// to the bridge's own environment.
	Env []string
	// Dir is Command's working directory; empty means the bridge's.
	Dir string
	// URL is the Streamable HTTP MCP server's endpoint.
	URL string
	// Headers are sent with every HTTP request to URL (for example an
	// API key).
	Headers map[string]string
	// HTTPClient is used for URL; nil means a default client.
	HTTPClient *http.Client
	// OAuth enables the MCP authorization flow for URL (discovery,
	// dynamic client registration, PKCE, refresh), with tokens kept per
	// RAP user_id; nil means none. See OAuthOptions.
	OAuth *OAuthOptions
	// Prefix is prepended to every MCP tool name, to avoid collisions
	// between servers ("fs_" makes "read_file" "fs_read_file"). The
	// tools the bridge adds itself are named after Name instead (see
	// OwnToolName). Empty means none.
	Prefix string
	// Mode is ModeDirect (the default when empty) or ModeProxy.
	Mode string
	// Logger receives the bridge's log lines; nil means slog.Default().
	Logger *slog.Logger
	// Server configures the RAP side (bearer token, durable store,
	// public URL...); nil means rap's defaults. Workers defaults to
	// DefaultWorkers.
	Server *rap.ServerOptions
	// MinBackoff and MaxBackoff bound the delay before restarting an MCP
	// server that exited; zero means the defaults.
	MinBackoff, MaxBackoff time.Duration
	// ConnectTimeout is the start-up limit: it bounds one start of the
	// MCP server up to the end of the initialize handshake (and one
	// tools/list). Zero means DefaultLauncherConnectTimeout for a
	// command run by a package launcher (IsPackageLauncher: npx, uvx...,
	// whose first start downloads the package), else
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// RestartWait is how long a call made while the server is being
	// restarted waits for it before ending with an error result; zero
	// means DefaultRestartWait.
	RestartWait time.Duration
	// TerminateWait is how long a stdio server gets to exit after its
	// standard input is closed, and again after SIGTERM, before it is
	// killed; zero means DefaultTerminateWait.
	TerminateWait time.Duration
	// SamplingModel answers the MCP server's sampling/createMessage
	// requests; nil declines them with an error saying how to enable it.
	SamplingModel model.Provider
	// Stderr receives a stdio server's standard error; nil means the
	// bridge's own standard error. Its last 2 KiB are quoted in the
	// error of a failed start.
	Stderr *os.File
	// TaskTimeout bounds an MCP task (a tools/call the server runs as a
	// task, see docs/mcp.md): past it the bridge sends tasks/cancel and
	// ends the call with an error result. Zero means DefaultTaskTimeout.
	TaskTimeout time.Duration
	// CallTimeout bounds one synchronous tools/call request (one the
	// server does not run as an MCP task), including whatever the server
	// asks for while it runs (sampling, elicitation): past it the bridge
	// cancels the request (notifications/cancelled) and ends the call
	// with one error result. Zero means DefaultCallTimeout.
	CallTimeout time.Duration
}

// defaultCallTimeout is what a zero Options.CallTimeout means; tests
// shorten it to see the default end a call.
var defaultCallTimeout = DefaultCallTimeout

// Bridge is one MCP server served as a RAP tool server. Create it with
// New, then Start it; it is an http.Handler.
type Bridge struct {
	opts   Options
	log    *slog.Logger
	srv    *rap.Server
	client *sdk.Client

	progress progressTable
	inflight calls
	watchers watchers

	mu      sync.Mutex
	session *sdk.ClientSession // nil while the server is down
	up      chan struct{}      // closed when session becomes non-nil
	// restarted is closed (and replaced) each time a session is set, so
	// that resource subscriptions renew themselves on a new session.
	restarted chan struct{}
	lastErr   error // why the server is down, for error results
	tools     map[string]*toolInfo
	skipped   []Problem
	stopped   bool

	refresh chan struct{} // a tools/list_changed arrived
	cancel  context.CancelFunc
	done    chan struct{}

	// stillStartingAfter: see the package variable of that name.
	stillStartingAfter time.Duration

	oauth      *oauthState // nil without Options.OAuth
	elicitDone elicitWaiters
	tasks      taskState
}

// Problem is an MCP tool left out of the RAP toolset, and why.
type Problem struct {
	// Tool is the MCP tool's name.
	Tool string
	// Reason says what was wrong with it.
	Reason string
}

func (p Problem) String() string { return fmt.Sprintf("tool %q left out: %s", p.Tool, p.Reason) }

// New checks the options and returns a Bridge that is not started yet.
// Name and one of Command and URL are required, so nil options are an
// error naming them. New fills the defaults in a copy: the caller's
// Options (and its Server) are left unchanged.
func New(o *Options) (*Bridge, error) {
	if o == nil {
		return nil, errors.New("mcp bridge: no options; set Options.Name and either Options.Command (stdio server) or Options.URL (Streamable HTTP server)")
	}
	opts := *o
	if strings.TrimSpace(opts.Name) == "" {
		return nil, errors.New("mcp bridge: no name; give the MCP server a name such as \"files\"")
	}
	if (len(opts.Command) == 0) == (opts.URL == "") {
		return nil, fmt.Errorf("mcp bridge %q: give either a command (stdio server) or a URL (Streamable HTTP server), not both or neither", opts.Name)
	}
	if len(opts.Command) > 0 && opts.Command[0] == "" {
		return nil, fmt.Errorf("mcp bridge %q: the command's program name is empty", opts.Name)
	}
	for _, kv := range opts.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("mcp bridge %q: environment entry %q is not KEY=VALUE", opts.Name, kv)
		}
	}
	switch opts.Mode {
	case "":
		opts.Mode = ModeDirect
	case ModeDirect, ModeProxy:
	default:
		return nil, fmt.Errorf("mcp bridge %q: mode %q is unknown; use %q (one RAP tool per MCP tool) or %q (two tools, list and invoke)", opts.Name, opts.Mode, ModeDirect, ModeProxy)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = defaultConnectTimeout(opts.Command)
	}
	if opts.TerminateWait <= 0 {
		opts.TerminateWait = DefaultTerminateWait
	}
	if opts.RestartWait <= 0 {
		opts.RestartWait = DefaultRestartWait
	}
	if opts.TaskTimeout <= 0 {
		opts.TaskTimeout = DefaultTaskTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = defaultCallTimeout
	}
	var oauth *oauthState
	if opts.OAuth != nil {
		if opts.URL == "" {
			return nil, fmt.Errorf("mcp bridge %q: OAuth is for Streamable HTTP servers (a URL); a stdio server gets its credentials from its environment", opts.Name)
		}
		var err error
		if oauth, err = newOAuthState(*opts.OAuth, opts.Name, opts.HTTPClient); err != nil {
			return nil, err
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("mcp_server", opts.Name)
	var so rap.ServerOptions
	if opts.Server != nil {
		so = *opts.Server
	}
	if so.Workers == 0 {
		so.Workers = DefaultWorkers
	}
	if so.Logger == nil {
		so.Logger = log
	}
	if so.Description == "" {
		so.Description = fmt.Sprintf("Tools of the MCP server %q, bridged to RAP by gorap.", opts.Name)
	}
	opts.Server = &so
	b := &Bridge{
		opts:      opts,
		log:       log,
		srv:       rap.NewServer(opts.Name, &so),
		up:        make(chan struct{}),
		restarted: make(chan struct{}),
		tools:     map[string]*toolInfo{},
		refresh:   make(chan struct{}, 1),
		done:      make(chan struct{}),
		oauth:     oauth,

		stillStartingAfter: stillStartingAfter,
	}
	b.progress.m = map[string]*progressSink{}
	b.client = sdk.NewClient(&sdk.Implementation{Name: "gorap-mcp-bridge", Version: "1"}, &sdk.ClientOptions{
		Logger: log,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case b.refresh <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			b.progress.deliver(req.Params)
		},
		ElicitationHandler: b.elicit,
		ElicitationCompleteHandler: func(_ context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
			if req.Params != nil {
				b.elicitDone.complete(req.Params.ElicitationID)
			}
		},
		CreateMessageHandler: b.sample, //nolint:staticcheck // sampling is deprecated in MCP 2026-07-28 but still served
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			if req.Params != nil {
				b.watchers.updated(req.Params.URI)
			}
		},
		Capabilities: &sdk.ClientCapabilities{
			RootsV2:     &sdk.RootCapabilities{ListChanged: true}, // the SDK's default
			Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}},
		},
	})
	if opts.Mode == ModeProxy {
		b.addProxyTools()
	}
	return b, nil
}

// Start starts the MCP server (or connects to it), lists its tools and
// starts serving RAP. An MCP server that cannot be started or does not
// answer the initialize handshake is an error: the caller reports it and
// skips this server. After Start, the bridge restarts a stdio server
// that exits and reconnects to an HTTP server that drops the session,
// with exponential backoff, until Shutdown.
//
// With Options.OAuth, Start uses the stored token of the user who signed
// in last; when there is none (or it no longer works) the bridge serves
// only the sign_in tool until a user signs in.
func (b *Bridge) Start(ctx context.Context) error {
	var cs *sdk.ClientSession
	var err error
	if b.oauth != nil {
		cs, err = b.startOAuth(ctx)
	} else {
		cs, err = b.connect(ctx)
	}
	if err != nil {
		return err
	}
	if cs != nil {
		// The tools, the subscription tool among them, are in place
		// before the RAP server starts: with a durable Store, Start
		// resumes the stored subscriptions.
		b.prepare(ctx, cs)
	}
	if err := b.srv.Start(ctx); err != nil {
		if cs != nil {
			b.setSession(nil)
			cs.Close()
		}
		if b.oauth != nil {
			b.oauth.closeListener()
		}
		return fmt.Errorf("mcp bridge %q: starting the RAP server: %w", b.opts.Name, err)
	}
	if cs == nil {
		return nil // waiting for a user to sign in
	}
	if err := b.superviseFrom(ctx, cs); err != nil {
		return err
	}
	b.resumeTasks(ctx)
	return nil
}

// adopt makes cs the main session of a started bridge: it lists the
// tools and starts the supervisor.
func (b *Bridge) adopt(ctx context.Context, cs *sdk.ClientSession) error {
	b.mu.Lock()
	stopped := b.stopped
	b.mu.Unlock()
	if stopped {
		cs.Close()
		return fmt.Errorf("mcp bridge %q is shutting down", b.opts.Name)
	}
	b.prepare(ctx, cs)
	return b.superviseFrom(ctx, cs)
}

// prepare makes cs the live session and lists its tools.
func (b *Bridge) prepare(ctx context.Context, cs *sdk.ClientSession) {
	b.setSession(cs)
	if err := b.syncTools(ctx, cs); err != nil {
		b.log.Warn("mcp bridge: listing the MCP server's tools failed; serving none until it works", "error", err)
	}
	b.addSubscribeTool(cs)
}

// superviseFrom starts the supervisor of the session cs.
func (b *Bridge) superviseFrom(ctx context.Context, cs *sdk.ClientSession) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		cancel()
		cs.Close()
		return fmt.Errorf("mcp bridge %q is shutting down", b.opts.Name)
	}
	b.cancel = cancel
	b.mu.Unlock()
	go b.supervise(sctx, cs)
	return nil
}

// ServeHTTP serves the RAP tool server: discovery, /invoke,
// /cancel_tool_call, /close_thread and the rest (see rap.Server), and
// with OAuth the redirect endpoint CallbackPath.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.oauth != nil && r.URL.Path == CallbackPath {
		b.oauth.serveCallback(w, r)
		return
	}
	b.srv.ServeHTTP(w, b.interceptCancel(r))
}

// Toolset returns the RAP manifest with the given endpoint.
func (b *Bridge) Toolset(endpoint string) *rap.Toolset { return b.srv.Toolset(endpoint) }

// Skipped lists the MCP tools left out of the toolset at the last
// listing, with the reason for each.
func (b *Bridge) Skipped() []Problem {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Problem(nil), b.skipped...)
}

// Name returns the MCP server's name.
func (b *Bridge) Name() string { return b.opts.Name }

// OwnToolName is the name of a tool the bridge adds itself (not one of
// the MCP server's): the server's name, "_" and base, whatever the
// Prefix, as the proxy tools {name}_list_tools and {name}_invoke_tool
// are. Bridges of different names never serve the same such tool, so no
// collision in a runtime's catalog (RAP TS-6) takes them away.
func (b *Bridge) OwnToolName(base string) string { return b.opts.Name + "_" + base }

// Shutdown stops serving RAP (calls in flight get ctx's deadline to
// finish, see rap.Server.Shutdown) and stops the MCP server.
func (b *Bridge) Shutdown(ctx context.Context) error {
	b.stopResumed()
	err := b.srv.Shutdown(ctx)
	b.mu.Lock()
	b.stopped = true
	cs, cancel := b.session, b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		<-b.done
	} else if cs != nil {
		cs.Close()
	}
	if b.oauth != nil {
		b.oauth.closeUsers()
		b.oauth.closeListener()
	}
	return err
}

// transport returns a fresh MCP transport for one connection.
func (b *Bridge) transport() sdk.Transport {
	if len(b.opts.Command) > 0 {
		cmd := exec.Command(b.opts.Command[0], b.opts.Command[1:]...)
		cmd.Env = append(os.Environ(), b.opts.Env...)
		cmd.Dir = b.opts.Dir
		setDeathSignal(cmd)
		var stderr io.Writer = os.Stderr
		if b.opts.Stderr != nil {
			stderr = b.opts.Stderr
		}
		return &stdioTransport{cmd: cmd, stderr: stderr, deliver: b.progress.deliver, terminateWait: b.opts.TerminateWait, status: b.tasks.statusUpdate}
	}
	var h auth.OAuthHandler
	if b.oauth != nil {
		h = b.oauth.mainHandler()
	}
	return b.httpTransport(h)
}

// httpTransport returns a Streamable HTTP transport to URL that
// authorizes with h (nil: no OAuth).
func (b *Bridge) httpTransport(h auth.OAuthHandler) sdk.Transport {
	return &sdk.StreamableClientTransport{Endpoint: b.opts.URL, HTTPClient: b.httpClient(), OAuthHandler: h}
}

// httpClient returns the client for URL: the configured one with the
// configured headers and the progress tap.
func (b *Bridge) httpClient() *http.Client {
	var c http.Client
	if b.opts.HTTPClient != nil {
		c = *b.opts.HTTPClient
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	if len(b.opts.Headers) > 0 {
		next = headerTransport{headers: b.opts.Headers, next: next}
	}
	c.Transport = tapTransport{next: next, deliver: b.progress.deliver}
	return &c
}

// describe names the MCP server for error messages.
func (b *Bridge) describe() string {
	if len(b.opts.Command) > 0 {
		return fmt.Sprintf("MCP server %q (command %s)", b.opts.Name, b.opts.Command[0])
	}
	return fmt.Sprintf("MCP server %q (%s)", b.opts.Name, b.opts.URL)
}

// connect starts the MCP server and runs the initialize handshake,
// within the start-up limit (Options.ConnectTimeout). A start that takes
// long is logged while it runs; a failed one is a *startError.
func (b *Bridge) connect(ctx context.Context) (*sdk.ClientSession, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, b.opts.ConnectTimeout, errStartupTimeout)
	defer cancel()
	t := b.transport()
	slow := make(chan struct{})
	go b.reportSlowStart(slow)
	cs, err := b.client.Connect(cctx, t, nil)
	close(slow)
	if st, ok := t.(*stdioTransport); ok && err == nil && st.conn != nil {
		b.tasks.conns.Store(cs, st.conn)
	} else if err == nil && b.opts.URL != "" && b.oauth == nil {
		b.tasks.conns.Store(cs, &httpTaskConn{url: b.opts.URL, client: b.httpClient(), cs: cs, elicit: b.elicit})
	}
	if err != nil {
		var tail *stderrTail
		if st, ok := t.(*stdioTransport); ok && st.stdin != nil { // the server ran
			st.close() // a server still starting is stopped
			tail = &st.tail
		}
		return nil, b.startFailure(cctx, err, tail)
	}
	return cs, nil
}

// setSession makes cs the live session (nil: the server is down).
func (b *Bridge) setSession(cs *sdk.ClientSession) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.session = cs
	if cs != nil {
		b.lastErr = nil
		close(b.restarted)
		b.restarted = make(chan struct{})
		select {
		case <-b.up:
		default:
			close(b.up)
		}
	} else {
		select {
		case <-b.up:
			b.up = make(chan struct{})
		default:
		}
	}
}

// currentSession returns the live session, waiting up to wait for one
// while the server is restarting.
func (b *Bridge) currentSession(ctx context.Context, wait time.Duration) (*sdk.ClientSession, error) {
	b.mu.Lock()
	cs, up, lastErr := b.session, b.up, b.lastErr
	b.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-up:
		b.mu.Lock()
		cs = b.session
		b.mu.Unlock()
		if cs != nil {
			return cs, nil
		}
	case <-t.C:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	why := ""
	if lastErr != nil {
		why = fmt.Sprintf(" (%v)", lastErr)
	}
	return nil, fmt.Errorf("Error: the %s is not running%s; the bridge keeps restarting it. Call the tool again in a moment.", b.describe(), why)
}

// supervise watches the session; when it ends it restarts the server
// with backoff, and it applies tools/list_changed refreshes.
func (b *Bridge) supervise(ctx context.Context, cs *sdk.ClientSession) {
	defer close(b.done)
	backoff := b.opts.MinBackoff
	for {
		ended := make(chan error, 1)
		go func(cs *sdk.ClientSession) { ended <- cs.Wait() }(cs)
		started := time.Now()
		var waitErr error
	watch:
		for {
			select {
			case <-ctx.Done():
				cs.Close()
				<-ended
				return
			case <-b.refresh:
				if err := b.syncTools(ctx, cs); err != nil {
					b.log.Warn("mcp bridge: refreshing the tool list after tools/list_changed failed", "error", err)
				}
			case waitErr = <-ended:
				b.tasks.conns.Delete(cs)
				break watch
			}
		}
		b.mu.Lock()
		if waitErr == nil {
			waitErr = errors.New("the connection closed")
		}
		b.lastErr = fmt.Errorf("it stopped: %v", waitErr)
		b.mu.Unlock()
		b.setSession(nil)
		if time.Since(started) > 10*b.opts.MaxBackoff {
			backoff = b.opts.MinBackoff
		}
		for {
			b.log.Error("mcp bridge: the MCP server stopped; calls in flight end with an error, restarting it",
				"server", b.describe(), "reason", waitErr, "restart_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, b.opts.MaxBackoff)
			next, err := b.connect(ctx)
			if err != nil {
				waitErr = err
				b.mu.Lock()
				b.lastErr = shortError(err) // reaches error results: not the server's standard error
				b.mu.Unlock()
				continue
			}
			cs = next
			break
		}
		b.log.Info("mcp bridge: the MCP server is running again", "server", b.describe())
		b.setSession(cs)
		if err := b.syncTools(ctx, cs); err != nil {
			b.log.Warn("mcp bridge: listing the MCP server's tools after the restart failed", "error", err)
		}
	}
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.next.RoundTrip(req)
}
