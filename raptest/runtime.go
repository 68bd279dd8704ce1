// Package raptest is a fake RAP runtime for testing tool servers, in the
// manner of net/http/httptest: it runs a real callback endpoint on a
// loopback port, sends real invocations over HTTP, and lets a test wait for
// the callbacks a tool sends back.
//
// A test of a tool needs only a few lines:
//
//	tool := mytool.New(nil) // a *rap.Server
//	tool.Start(ctx)
//	defer tool.Shutdown(ctx)
//	srv := httptest.NewServer(tool)
//	defer srv.Close()
//	rt := raptest.NewRuntime()
//	defer rt.Close()
//	call, err := rt.Invoke(ctx, srv.URL, "get_current_time", nil)
//	...
//	res, err := call.Result(ctx)   // the tool_result
//	...
//	if errs := rt.Errors(); len(errs) > 0 { t.Fatal(errs) }
//
// Invoke discovers and validates the toolset first (RAP TS-4, TS-5) and
// checks the arguments against the tool's input schema (RAP IN-2); the
// Unchecked option sends what a real runtime would refuse, to test how a
// tool answers it (RAP IN-3).
//
// The runtime is strict where the protocol is: every callback is decoded
// with rap.DecodeCallback, must carry Content-Type application/json, must
// echo the invocation's group_id, id and call_id. A message that breaks
// these rules is answered with a 4xx status and recorded. A message in the
// wrong order (a second tool_result, an event after the final one, or an
// event before the confirming tool_result with subscription: true) is
// accepted, as a runtime would answer it before discarding it, and
// recorded too. Errors reports the records so that a test can fail on
// them.
//
// Runtime is also usable outside tests: the "rap invoke" command uses it as
// its one-call runtime.
package raptest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/rap"
)

// Default limits. They keep a misbehaving tool from exhausting memory.
const (
	// DefaultMaxCallbackBytes bounds the body of one callback message.
	DefaultMaxCallbackBytes = 8 << 20
	// maxErrorBody bounds how much of an error answer is quoted in errors.
	maxErrorBody = 2 << 10
	// maxRecordedErrors bounds Errors; later errors are counted, not kept.
	maxRecordedErrors = 1000
	// callbackReadTimeout bounds reading one callback request, headers
	// and body: a callback of DefaultMaxCallbackBytes needs 140 KB/s.
	callbackReadTimeout = time.Minute
)

// callbackPrefix is the path under which per-call callback URLs live.
const callbackPrefix = "/callback/"

// ErrClosed is returned by waits that were interrupted by Runtime.Close.
var ErrClosed = errors.New("raptest: runtime closed")

// Runtime is a fake RAP runtime: a callback listener on a loopback port and
// an HTTP client that discovers toolsets and sends invocations. Its methods
// are safe for concurrent use. Create one with NewRuntime and Close it when
// done.
type Runtime struct {
	cfg      config
	client   *http.Client
	listener net.Listener
	server   *http.Server
	url      string
	threadID string
	done     chan struct{}

	received atomic.Int64

	mu        sync.Mutex
	calls     map[string]*Call // by callback token
	failLeft  int
	errs      []error
	errsLost  int
	toolsets  map[string]*discovered // by base URL
	closeOnce sync.Once
	// fresh holds the callback connections that have not yet sent a
	// request (http.StateNew). Close closes them at once: graceful
	// shutdown would otherwise wait 5 s for each, and a tool's client
	// often dials a connection it then does not use.
	fresh map[net.Conn]struct{}
}

type config struct {
	addr        string
	failN       int
	failStatus  int
	client      *http.Client
	bearer      string
	logger      *slog.Logger
	maxCallback int64
	threadID    string
}

// Option configures a Runtime.
type Option func(*config)

// WithFailures makes the callback endpoint answer status to the next n
// callback deliveries instead of accepting them, then 200 again. Use it to
// test a tool's retries (RAP TR-6): with a 5xx status a well-behaved tool
// delivers the message again; with a 4xx status it gives up. Failed
// deliveries are neither recorded nor counted by Received.
func WithFailures(n int, status int) Option {
	return func(c *config) { c.failN, c.failStatus = n, status }
}

// WithAddr sets the address the callback listener binds to. The default is
// "127.0.0.1:0", a free loopback port. A tool on another machine needs an
// address it can reach.
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithHTTPClient sets the client used for discovery, invocations and
// notifications. The default has a 30-second timeout.
func WithHTTPClient(client *http.Client) Option { return func(c *config) { c.client = client } }

// WithBearerToken makes every request the runtime sends to tool servers
// (discovery, invocations, /cancel_tool_call, /close_thread, /migrate and
// user-choice responses) carry "Authorization: Bearer token" (RAP TR-8, CA-3). The token
// is never logged.
func WithBearerToken(token string) Option { return func(c *config) { c.bearer = token } }

// WithLogger sets the logger for rejected callbacks. The default discards.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMaxCallbackBytes bounds the size of one callback body; a larger body
// is answered 413 and recorded as an error. The default is
// DefaultMaxCallbackBytes.
func WithMaxCallbackBytes(n int64) Option { return func(c *config) { c.maxCallback = n } }

// WithDefaultThread sets the runtime's default thread id, sent as
// group_id by Invoke unless the InThread option names another. The default
// is a fresh random id.
func WithDefaultThread(id string) Option { return func(c *config) { c.threadID = id } }

// NewRuntime starts a fake runtime whose callback endpoint listens on a
// free loopback port. It panics if it cannot listen, as httptest.NewServer
// does; use Start to get the error instead.
func NewRuntime(opts ...Option) *Runtime {
	rt, err := Start(opts...)
	if err != nil {
		panic(err)
	}
	return rt
}

// Start is NewRuntime that returns an error instead of panicking.
func Start(opts ...Option) (*Runtime, error) {
	cfg := config{addr: "127.0.0.1:0", maxCallback: DefaultMaxCallbackBytes}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.maxCallback <= 0 {
		cfg.maxCallback = DefaultMaxCallbackBytes
	}
	if cfg.threadID == "" {
		cfg.threadID = "thread_" + randomHex(8)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("raptest: listen for callbacks on %s: %w (choose a free address with WithAddr)", cfg.addr, err)
	}
	base := cfg.client
	if base == nil {
		base = &http.Client{Timeout: 30 * time.Second}
	}
	client := base
	if cfg.bearer != "" {
		c := *base
		c.Transport = bearer.Transport(cfg.bearer, c.Transport)
		client = &c
	}
	rt := &Runtime{
		cfg:      cfg,
		client:   client,
		listener: ln,
		url:      "http://" + ln.Addr().String(),
		threadID: cfg.threadID,
		done:     make(chan struct{}),
		calls:    map[string]*Call{},
		failLeft: cfg.failN,
		toolsets: map[string]*discovered{},
		fresh:    map[net.Conn]struct{}{},
	}
	rt.server = &http.Server{
		Handler:           http.HandlerFunc(rt.serveCallback),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       callbackReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnState:         rt.trackConn,
	}
	go rt.server.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed on Close.
	return rt, nil
}

// trackConn keeps rt.fresh: the connections still in http.StateNew.
func (rt *Runtime) trackConn(c net.Conn, state http.ConnState) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if state == http.StateNew {
		select {
		case <-rt.done: // accepted while closing: it will not be served
			_ = c.Close()
		default:
			rt.fresh[c] = struct{}{}
		}
	} else {
		delete(rt.fresh, c)
	}
}

// Close stops the callback listener and wakes every waiting call with
// ErrClosed. Callbacks being handled finish (for up to 5 s); connections
// that carry no request are closed at once. It is safe to call more than
// once.
func (rt *Runtime) Close() {
	rt.closeOnce.Do(func() {
		close(rt.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- rt.server.Shutdown(ctx) }()
		// Shutdown has closed the listener or is about to; a connection
		// that has not sent a request yet never will be served, and
		// Shutdown would count it as busy for 5 s.
		rt.mu.Lock()
		for c := range rt.fresh {
			_ = c.Close()
		}
		rt.mu.Unlock()
		if err := <-shut; err != nil {
			rt.server.Close()
		}
	})
}

// URL returns the base URL of the callback listener, such as
// "http://127.0.0.1:41234". Callback URLs sent to tools lie under it.
func (rt *Runtime) URL() string { return rt.url }

// ThreadID returns the default thread id, sent as group_id by Invoke.
func (rt *Runtime) ThreadID() string { return rt.threadID }

// Client returns the HTTP client the runtime uses to reach tool servers. It
// carries the bearer token given with WithBearerToken.
func (rt *Runtime) Client() *http.Client { return rt.client }

// Received reports how many callback deliveries were accepted (answered
// 200). A test of exactly-once delivery compares it with the number of
// messages the tool sent.
func (rt *Runtime) Received() int { return int(rt.received.Load()) }

// Errors returns the problems found in callbacks so far: messages that
// failed to decode, carried the wrong ids, arrived for an unknown callback
// URL, or broke the order rules. A test of a well-behaved tool asserts that
// it is empty.
func (rt *Runtime) Errors() []error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := append([]error(nil), rt.errs...)
	if rt.errsLost > 0 {
		out = append(out, fmt.Errorf("raptest: %d further callback errors were not kept", rt.errsLost))
	}
	return out
}

func (rt *Runtime) recordError(err error) {
	rt.mu.Lock()
	if len(rt.errs) < maxRecordedErrors {
		rt.errs = append(rt.errs, err)
	} else {
		rt.errsLost++
	}
	rt.mu.Unlock()
	rt.cfg.logger.Warn("raptest: rejected callback", "err", err)
}

// CallbackError describes a callback the runtime rejected or found out of
// order. Status is the HTTP status it was answered with.
type CallbackError struct {
	// CallID is the id of the invocation the callback URL belongs to, or
	// empty when the URL matched no call.
	CallID string
	// Status is the HTTP status the delivery was answered with.
	Status int
	// Problem says what was wrong.
	Problem string
}

// Error says which call's callback was refused, with what status and why.
func (e *CallbackError) Error() string {
	if e.CallID == "" {
		return fmt.Sprintf("raptest: callback answered %d: %s", e.Status, e.Problem)
	}
	return fmt.Sprintf("raptest: callback for call %s answered %d: %s", e.CallID, e.Status, e.Problem)
}

// reject answers a callback with status and records why.
func (rt *Runtime) reject(w http.ResponseWriter, callID string, status int, problem string) {
	rt.recordError(&CallbackError{CallID: callID, Status: status, Problem: problem})
	http.Error(w, problem, status)
}

// serveCallback is the handler of the callback listener.
func (rt *Runtime) serveCallback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		rt.reject(w, "", http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+": callbacks must be POSTed (RAP TR-5)")
		return
	}
	token, ok := strings.CutPrefix(r.URL.Path, callbackPrefix)
	rt.mu.Lock()
	call := rt.calls[token]
	rt.mu.Unlock()
	if !ok || call == nil {
		// The path is the secret: never echo it into logs or errors.
		rt.reject(w, "", http.StatusNotFound, "unknown callback URL: it belongs to no invocation of this runtime; POST callbacks to the invocation's callback_url exactly")
		return
	}
	id := call.Invocation.ID
	r.Body = http.MaxBytesReader(w, r.Body, rt.cfg.maxCallback)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			rt.reject(w, id, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", rt.cfg.maxCallback))
			return
		}
		rt.reject(w, id, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	if rt.takeFailure() {
		http.Error(w, "raptest: injected failure (WithFailures)", rt.cfg.failStatus)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		rt.reject(w, id, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type is %q; callbacks must be sent as application/json (RAP TR-1)", r.Header.Get("Content-Type")))
		return
	}
	msg, err := rap.DecodeCallback(body)
	if err != nil {
		rt.reject(w, id, http.StatusBadRequest, "invalid callback message: "+err.Error())
		return
	}
	if status, problem := call.check(msg); status != 0 {
		rt.reject(w, id, status, problem)
		return
	}
	// Count before the message becomes visible, so that a test that saw
	// it also sees it counted.
	rt.received.Add(1)
	call.add(msg)
	w.WriteHeader(http.StatusOK)
}

// takeFailure reports whether this delivery is one of the failures asked
// for with WithFailures.
func (rt *Runtime) takeFailure() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.failLeft > 0 {
		rt.failLeft--
		return true
	}
	return false
}

// StatusError is returned when a tool server answers a request with a
// status other than 200.
type StatusError struct {
	// URL is the address the request went to.
	URL string
	// Status is the HTTP status code of the answer.
	Status int
	// Body is the start of the answer's body.
	Body string
}

// Error names the URL, the status and the start of the answer's body.
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("raptest: %s answered %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if b := strings.TrimSpace(e.Body); b != "" {
		msg += ": " + b
	}
	return msg
}

// post sends body as JSON to url and turns any answer but 200 into a
// StatusError.
func (rt *Runtime) post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("raptest: building request to %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.client.Do(req)
	if err != nil {
		return fmt.Errorf("raptest: POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return &StatusError{URL: url, Status: resp.StatusCode, Body: string(b)}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) //nolint:errcheck // drain for connection reuse
	return nil
}

// CloseThread POSTs {thread_id} to baseURL/close_thread (RAP TC-1) and
// returns an error unless the tool server answers 200 (RAP TC-2).
func (rt *Runtime) CloseThread(ctx context.Context, baseURL, threadID string) error {
	body, _ := json.Marshal(rap.CloseThreadRequest{ThreadID: threadID})
	return rt.post(ctx, joinURL(baseURL, "/close_thread"), body)
}

// Migrate asks the tool server at baseURL to move a session's state to the
// matching tool server at destinationURL, as a runtime moving the session
// to another runtime does: it POSTs {session_id, destination_url} to
// baseURL/migrate (RAP MI-1), with the bearer token of WithBearerToken,
// and returns nil when the server answers 200, that is once the
// destination holds the state. Any other answer is a *StatusError carrying
// the status and the server's message.
//
// A runtime calls /migrate only on a toolset that says needsMigration:
// true, so Migrate discovers the toolset first (unless this runtime
// already has) and returns an error without sending anything when it does
// not say so. sessionID is the session's root thread id; neither argument
// is checked, so that a test can send what a server must refuse.
func (rt *Runtime) Migrate(ctx context.Context, baseURL, sessionID, destinationURL string) error {
	d, err := rt.toolset(ctx, baseURL)
	if err != nil {
		return err
	}
	if !d.ts.NeedsMigration {
		return fmt.Errorf("raptest: toolset %q at %s does not say needsMigration: true, so a runtime never calls its /migrate (RAP MI-1); a Go tool server says it when rap.ServerOptions.Migrator is set", d.ts.Name, baseURL)
	}
	body, _ := json.Marshal(rap.MigrateRequest{SessionID: sessionID, DestinationURL: destinationURL})
	return rt.post(ctx, joinURL(baseURL, rap.MigratePath), body)
}

// ToolCallStatus POSTs {thread_id, tool_call_id} to baseURL/tool_call_status
// and returns the server's answer: a status of running, delivering or
// subscribed (200), or unknown (404 with that JSON body). Any other answer,
// including a 404 without the body (a server without the endpoint), is a
// *StatusError.
func (rt *Runtime) ToolCallStatus(ctx context.Context, baseURL, threadID, toolCallID string) (*rap.ToolCallStatus, error) {
	body, _ := json.Marshal(rap.ToolCallStatusRequest{ThreadID: threadID, ToolCallID: toolCallID})
	url := joinURL(baseURL, rap.ToolCallStatusPath)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("raptest: building request to %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("raptest: POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var st rap.ToolCallStatus
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound {
		if json.Unmarshal(b, &st) == nil && st.Status != "" && (resp.StatusCode == http.StatusOK) == (st.Status != rap.CallUnknown) {
			return &st, nil
		}
	}
	return nil, &StatusError{URL: url, Status: resp.StatusCode, Body: string(b)}
}

// Choose answers a user_choice message: it POSTs {id, selected} to the
// message's response_url (RAP UC-2). selected must be a valid index into
// uc.Choices; to simulate a dismissal pass uc.Default.
func (rt *Runtime) Choose(ctx context.Context, uc *rap.UserChoice, selected int) error {
	if uc == nil {
		return errors.New("raptest: Choose needs the user_choice message the tool sent")
	}
	if selected < 0 || selected >= len(uc.Choices) {
		return fmt.Errorf("raptest: selected index %d is out of range for %d choices", selected, len(uc.Choices))
	}
	body, _ := json.Marshal(rap.UserChoiceResponse{ID: uc.ID, Selected: selected})
	return rt.post(ctx, uc.ResponseURL, body)
}

// AnswerInput answers a user input (the user_input gorap extension) as a
// runtime does: it POSTs {id, values} to the message's response_url, or
// {id, dismissed: true} when values is nil. The values are sent as they
// are, so that a test can check how the tool treats values that do not
// fit its form.
func (rt *Runtime) AnswerInput(ctx context.Context, ui *rap.UserInput, values map[string]any) error {
	if ui == nil {
		return errors.New("raptest: AnswerInput needs the user_input message the tool sent")
	}
	resp := map[string]any{"id": ui.ID}
	if values == nil {
		resp["dismissed"] = true
	} else {
		resp["values"] = values
	}
	body, _ := json.Marshal(resp)
	return rt.post(ctx, ui.ResponseURL, body)
}

// joinURL appends path to base, avoiding a doubled slash.
func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + path
}

// randomHex returns n random bytes as hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
