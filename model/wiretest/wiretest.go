// Package wiretest provides local HTTP servers that speak the wire formats
// of the Anthropic Messages API and the OpenAI Chat Completions API,
// streaming included, so that model providers and whole runtimes can be
// tested without a network or an API key.
//
// A server is driven by a Script, a Go function that sees each decoded
// request and returns a Reply: text, tool calls, or an HTTP error. Every
// request is recorded, raw body included, so a test can assert exactly what
// a client sent.
//
//	srv := wiretest.NewAnthropic(wiretest.CallToolThenAnswer("get_weather", json.RawMessage(`{"city":"Oslo"}`)))
//	defer srv.Close()
//	// point ANTHROPIC_BASE_URL (or Options.BaseURL) at srv.URL
//
// Like the real services, the servers reject malformed conversations with
// HTTP 400: a tool call left without its result, a result that answers no
// call, an empty text block, and so on. A provider that passes these checks
// sends conversations the real APIs accept.
//
// The tests every provider must pass are written here once: a provider
// describes itself in a Harness and calls TestProvider, FuzzConversation
// and BenchmarkComplete from its own tests.
package wiretest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gorap/gorap/model"
)

// MaxRequestBytes bounds the request bodies a server reads.
const MaxRequestBytes = 32 << 20

// DefaultChunkSize is how many bytes of text or tool arguments one streamed
// delta carries when a Reply leaves ChunkSize at zero.
const DefaultChunkSize = 8

// Request is one request a client sent, decoded into the provider-neutral
// form of package model. Body keeps the exact JSON for assertions on the
// wire format itself.
type Request struct {
	// Path is the URL path, such as "/v1/messages".
	Path string
	// Header holds the request headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Model is the requested model id.
	Model string
	// System is the system prompt.
	System string
	// MaxTokens is max_tokens (or max_completion_tokens), 0 if absent.
	MaxTokens int
	// Stream reports whether a streamed answer was requested.
	Stream bool
	// Messages is the conversation. OpenAI "tool" messages appear as user
	// messages carrying ToolResults; images outside tool results are only
	// in Body.
	Messages []model.Message
	// Tools are the tools offered to the model.
	Tools []model.ToolSpec
	// Breakpoints are the request's prompt-cache breakpoints (Anthropic
	// cache_control markers), in request order.
	Breakpoints []Breakpoint
	// CacheReadBytes and CacheWriteBytes are how much of the request's
	// prefix the server's prompt cache served and stored (see
	// Breakpoint); usage reports them as tokens of four bytes.
	CacheReadBytes, CacheWriteBytes int
	// ContextManagement is the request's context_management member as
	// sent (Anthropic), nil when it has none.
	ContextManagement json.RawMessage
	// CompactionBlocks are the compaction blocks of the request's
	// assistant messages (Anthropic), each as its bytes in Body.
	CompactionBlocks [][]byte
}

// ToolResults returns the tool results sent after the last assistant
// message: the answers to the model's latest tool calls.
func (r Request) ToolResults() []model.ToolResult {
	var out []model.ToolResult
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != model.RoleAssistant; i-- {
		out = append(append([]model.ToolResult(nil), r.Messages[i].ToolResults...), out...)
	}
	return out
}

// Reply is what a Script answers. A Reply with a Status other than 0 or 200
// is an HTTP error in the provider's error format; otherwise the server
// answers with Text (if any) followed by ToolCalls (if any).
type Reply struct {
	// Text is the assistant's text.
	Text string
	// ToolCalls are the tool calls; an empty ID is filled in.
	ToolCalls []model.ToolCall
	// StopReason overrides the stop reason; empty means derived
	// ("tool_use"/"end_turn" for Anthropic, "tool_calls"/"stop" for OpenAI).
	StopReason string
	// ChunkSize is the size in bytes of each streamed delta of text or
	// tool arguments; zero means DefaultChunkSize.
	ChunkSize int
	// Hang makes a streamed reply stop after the text deltas and wait,
	// without finishing, until the client goes away or the server closes.
	Hang bool
	// StreamError, when set, ends a streamed reply after its text deltas
	// with an error event carrying this message (an overloaded_error for
	// Anthropic, a server_error for OpenAI), as the services do when they
	// fail mid-answer.
	StreamError string
	// Status, when not 0 or 200, makes the reply an HTTP error.
	Status int
	// Error is the error message of an error reply.
	Error string
	// Header holds extra response headers, such as "Retry-After-Ms".
	Header http.Header
	// Compaction, when set, starts the reply with a compaction block, as
	// Anthropic's server-side compaction does (Anthropic only).
	Compaction *Compaction
}

// Compaction is the compaction block a reply starts with.
type Compaction struct {
	// Block is the content_block of the block's content_block_start
	// event, sent as these bytes (a JSON object of type "compaction").
	Block json.RawMessage
	// Delta, when set, is the delta of one content_block_delta event
	// sent after the start, such as a compaction_delta carrying the
	// summary, sent as these bytes.
	Delta json.RawMessage
}

// Script decides the reply to one request.
type Script func(req Request) Reply

// Replies returns a Script that answers the n-th request with rs[n]. Once
// the replies are used up it answers with an HTTP 500 error that says so.
func Replies(rs ...Reply) Script {
	var mu sync.Mutex
	n := 0
	return func(Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		if n >= len(rs) {
			return Reply{Status: http.StatusInternalServerError, Error: fmt.Sprintf("wiretest: script has only %d replies; request %d was not expected", len(rs), n+1)}
		}
		n++
		return rs[n-1]
	}
}

// CallToolThenAnswer returns a Script for the classic agent loop. While no
// tool result follows the last assistant message it calls toolName with
// args; once results are present it answers with a text that quotes them:
// "The tool answered: <text of each result>".
func CallToolThenAnswer(toolName string, args json.RawMessage) Script {
	return func(req Request) Reply {
		results := req.ToolResults()
		if len(results) == 0 {
			return Reply{ToolCalls: []model.ToolCall{{Name: toolName, Arguments: args}}}
		}
		var parts []string
		for _, r := range results {
			parts = append(parts, ResultText(r))
		}
		return Reply{Text: "The tool answered: " + strings.Join(parts, "\n")}
	}
}

// ResultText is the text of a tool result: its text content items joined
// by newlines, or Text when it has no content items. It is
// r.PlainText(), kept for callers of this package.
func ResultText(r model.ToolResult) string { return r.PlainText() }

// wire is one provider's wire format.
type wire interface {
	path() string
	// decode parses and validates a request body; an error is a 400.
	decode(body []byte, req *Request) error
	// authorize checks credentials; a non-empty message is a 401.
	authorize(h http.Header, key string) string
	writeError(w http.ResponseWriter, status int, msg string)
	writeReply(w http.ResponseWriter, r *http.Request, req Request, rep Reply, seq int, stop <-chan struct{})
	breakpoints(body []byte) []Breakpoint
}

// API is an http.Handler that speaks one provider's wire format, answers
// with a Script and records every request. Mount it on any mux, or use
// NewAnthropic / NewOpenAI for a ready server.
type API struct {
	wire   wire
	script Script
	stop   chan struct{}
	once   sync.Once

	mu      sync.Mutex
	key     string
	reqs    []Request
	discard bool // keep no requests (ForgetRequests)
	served  int
	cache   map[[32]byte]bool // prompt-cache prefixes written (promptcache.go)
	noCache bool              // WithoutPromptCache
	shallow bool              // Shallow
	recent  [][]byte          // the last bodies, for OpenAI's automatic prompt cache
}

// WithoutPromptCache turns the prompt-cache simulation off (see
// Breakpoint): requests then report no breakpoints and no cached tokens,
// and the server spends no CPU on them, as a benchmark wants. It returns
// a for chaining.
func (a *API) WithoutPromptCache() *API {
	a.mu.Lock()
	a.noCache = true
	a.mu.Unlock()
	return a
}

// AnthropicAPI returns a handler for POST /v1/messages.
func AnthropicAPI(s Script) *API { return newAPI(anthropicWire{}, s) }

// OpenAIAPI returns a handler for POST /v1/chat/completions (also served
// without the /v1 prefix, as some local servers do).
func OpenAIAPI(s Script) *API { return newAPI(openaiWire{}, s) }

func newAPI(w wire, s Script) *API {
	if s == nil {
		s = func(Request) Reply { return Reply{Text: "ok"} }
	}
	return &API{wire: w, script: s, stop: make(chan struct{})}
}

// RequireAPIKey makes the API answer 401, as the real service does, unless
// a request carries key. It returns a for chaining.
func (a *API) RequireAPIKey(key string) *API {
	a.mu.Lock()
	a.key = key
	a.mu.Unlock()
	return a
}

// ForgetRequests makes the API keep no requests, so that a long-running
// benchmark does not grow without bound; Requests then returns nil. It
// returns a for chaining.
func (a *API) ForgetRequests() *API {
	a.mu.Lock()
	a.discard, a.reqs = true, nil
	a.mu.Unlock()
	return a
}

// Requests returns a copy of the requests received so far, in order,
// including rejected ones.
func (a *API) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.reqs...)
}

// release ends every hanging reply.
func (a *API) release() { a.once.Do(func() { close(a.stop) }) }

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := a.wire.path()
	if r.URL.Path != p && r.URL.Path != strings.TrimPrefix(p, "/v1") {
		a.wire.writeError(w, http.StatusNotFound, fmt.Sprintf("wiretest: no route for %s %s; this server serves POST %s", r.Method, r.URL.Path, p))
		return
	}
	if r.Method != http.MethodPost {
		a.wire.writeError(w, http.StatusMethodNotAllowed, "wiretest: use POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		a.wire.writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("wiretest: reading the request body: %v", err))
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	a.mu.Lock()
	noCache, shallow := a.noCache, a.shallow
	a.mu.Unlock()
	var decodeErr error
	if shallow {
		decodeErr = a.shallowDecode(body, &req)
	} else {
		decodeErr = a.wire.decode(body, &req)
	}

	if decodeErr == nil && !noCache {
		if req.Breakpoints = a.wire.breakpoints(body); len(req.Breakpoints) > 0 {
			a.mu.Lock()
			req.CacheReadBytes, req.CacheWriteBytes = a.cacheLookup(req.Breakpoints)
			a.mu.Unlock()
		} else if _, auto := a.wire.(openaiWire); auto {
			a.mu.Lock()
			req.CacheReadBytes = a.autoCache(body)
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	a.served++
	seq := a.served
	if !a.discard {
		a.reqs = append(a.reqs, req)
	}
	key := a.key
	a.mu.Unlock()

	if key != "" {
		if msg := a.wire.authorize(r.Header, key); msg != "" {
			a.wire.writeError(w, http.StatusUnauthorized, msg)
			return
		}
	}
	if decodeErr != nil {
		a.wire.writeError(w, http.StatusBadRequest, decodeErr.Error())
		return
	}
	rep := a.script(req)
	for k, vs := range rep.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		a.wire.writeError(w, rep.Status, rep.Error)
		return
	}
	a.wire.writeReply(w, r, req, rep, seq, a.stop)
}

// Server is an API listening on a loopback port.
type Server struct {
	*API
	// URL is the server's base URL, such as "http://127.0.0.1:40123"; use
	// it as the provider's base URL.
	URL string
	ts  *httptest.Server
}

// NewAnthropic starts a server speaking the Anthropic Messages API.
func NewAnthropic(s Script) *Server { return start(AnthropicAPI(s)) }

// NewOpenAI starts a server speaking the OpenAI Chat Completions API. Its
// base URL for OpenAI clients is URL + "/v1".
func NewOpenAI(s Script) *Server { return start(OpenAIAPI(s)) }

func start(a *API) *Server {
	ts := httptest.NewServer(a)
	return &Server{API: a, URL: ts.URL, ts: ts}
}

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close ends hanging replies and shuts the server down.
func (s *Server) Close() {
	s.release()
	s.ts.Close()
}

// chunks splits s into pieces of about size bytes, never inside a UTF-8
// sequence.
func chunks(s string, size int) []string {
	if size <= 0 {
		size = DefaultChunkSize
	}
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// sse writes server-sent events, flushing after each.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// send writes one event; event may be empty (OpenAI sends data lines only).
func (s *sse) send(event string, data any) {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		b, _ = json.Marshal(d)
	}
	if event != "" {
		fmt.Fprintf(s.w, "event: %s\n", event)
	}
	// Data with line breaks (bytes a test chose) takes one data line per
	// line; the client joins them with line breaks.
	for line := range strings.SplitSeq(string(b), "\n") {
		fmt.Fprintf(s.w, "data: %s\n", line)
	}
	fmt.Fprint(s.w, "\n")
	_ = s.rc.Flush()
}

// hang waits until the client leaves or the server stops.
func hang(r *http.Request, stop <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-stop:
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"type":"api_error","message":"wiretest: cannot encode the reply"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// stopReason is rep.StopReason or, when that is empty, the one the API
// derives: toolUse when the reply makes tool calls, endTurn otherwise.
func (rep Reply) stopReason(endTurn, toolUse string) string {
	switch {
	case rep.StopReason != "":
		return rep.StopReason
	case len(rep.ToolCalls) > 0:
		return toolUse
	}
	return endTurn
}

// fillIDs gives every tool call without an ID one of the form prefix+seq+n.
func fillIDs(calls []model.ToolCall, prefix string, seq int) []model.ToolCall {
	out := make([]model.ToolCall, len(calls))
	for i, c := range calls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("%s%d_%d", prefix, seq, i)
		}
		if len(c.Arguments) == 0 {
			c.Arguments = json.RawMessage(`{}`)
		}
		out[i] = c
	}
	return out
}
