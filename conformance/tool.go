package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// ToolConfig says which tool server the tool suite checks and what it may
// do to it. A tool server's tools have side effects, so the suite calls
// only the tools in Calls, plus, unless NoDefaultCalls, the tools annotated
// readOnly that need no arguments.
type ToolConfig struct {
	// BaseURL is the tool server's base URL; discovery is fetched from
	// {BaseURL}/.well-known/rap-toolset and /close_thread,
	// /cancel_tool_call, /migrate and /tool_call_status are posted under it.
	BaseURL string
	// Endpoint, when set, replaces the toolset's endpoint for invocations
	// (for a server that advertises an address the kit cannot reach).
	Endpoint string
	// Token, when set, is sent as "Authorization: Bearer Token" on every
	// request but discovery, and the authentication checks run.
	Token string
	// CallbackListen is the address the kit's callback endpoint listens
	// on; empty means 127.0.0.1 on a free port.
	CallbackListen string
	// CallbackURL is the base URL the tool server reaches the callback
	// endpoint at, when it differs from the listening address (a server in
	// a container); empty means http://{the listening address}.
	CallbackURL string
	// Calls are the tools the suite may call, with the arguments to call
	// each with. Each allowed call may be made a dozen times.
	Calls map[string]json.RawMessage
	// NoDefaultCalls stops the suite from calling tools annotated readOnly
	// that need no arguments.
	NoDefaultCalls bool
	// AckWithin is how soon an invocation must be acknowledged; zero
	// means 2 s.
	AckWithin time.Duration
	// ResultWait is how long the suite waits for a callback; zero means
	// 15 s.
	ResultWait time.Duration
	// RetryWait is how long the suite waits for a callback to be retried
	// after it answered 503; zero means 20 s.
	RetryWait time.Duration
	// QuietWait is how long the suite watches for a message that must not
	// come (a retry after a 4xx, an event after cancellation); zero means
	// 2 s.
	QuietWait time.Duration
	// StallFor is how long the callback endpoint stalls its answer in the
	// slow-endpoint check; zero means 5 s.
	StallFor time.Duration
}

func (c *ToolConfig) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.AckWithin, 2*time.Second)
	def(&c.ResultWait, 15*time.Second)
	def(&c.RetryWait, 20*time.Second)
	def(&c.QuietWait, 2*time.Second)
	def(&c.StallFor, 5*time.Second)
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
}

// toolDef is one tool of the toolset as the suite reads it.
type toolDef struct {
	Name        string
	Schema      map[string]any
	Annotations map[string]any
}

// allowedCall is a tool the suite may call, and its arguments.
type allowedCall struct {
	Tool string
	Args json.RawMessage
}

// toolRun is what the checks of one run share: the callback endpoint and
// what earlier checks learned.
type toolRun struct {
	cfg  ToolConfig
	sink *callbackSink

	mu             sync.Mutex
	manifest       map[string]any
	tools          []toolDef
	endpoint       string
	needsMigration bool
	calls          []allowedCall
	good           *allowedCall // a call whose result arrives
	goodErr        bool         // good's result was an Error: result
	subs           []*subscriptionCall
	errorResults   []string // texts of the results of failed calls
}

// subscriptionCall is an allowed call whose result confirmed a
// subscription.
type subscriptionCall struct {
	call    allowedCall
	inv     map[string]any
	ib      *inbox
	confirm received
	events  []received
	ended   bool // cancelled or final event seen
}

// ToolSuite returns the suite that checks a RAP tool server. Running it
// starts the kit's callback endpoint, which stops when the run ends.
func ToolSuite(cfg ToolConfig) *Suite {
	cfg.defaults()
	r := &toolRun{cfg: cfg}
	s := &Suite{Name: "tool"}
	s.Cleanup(r.cleanup)
	r.addDiscovery(s)
	r.addInvocation(s)
	r.addDelivery(s)
	r.addLifecycle(s)
	s.AlwaysRun("tool.discovery.document", "tool.ack.status", "tool.result.delivered")
	return s
}

// cleanup cancels the subscriptions still active and stops the callback
// endpoint.
func (r *toolRun) cleanup() {
	r.mu.Lock()
	sink, subs := r.sink, r.subs
	r.sink, r.subs, r.good, r.manifest = nil, nil, nil, nil
	r.mu.Unlock()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, sc := range subs {
		if sc.ended {
			continue
		}
		body, _ := json.Marshal(map[string]any{"thread_id": sc.inv["group_id"], "tool_call_id": sc.inv["id"]})
		req, err := http.NewRequest(http.MethodPost, r.cfg.BaseURL+"/cancel_tool_call", bytes.NewReader(body))
		if err != nil {
			continue
		}
		r.authorize(req)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	if sink != nil {
		sink.close()
	}
}

// ensureSink starts the callback endpoint on first use.
func (r *toolRun) ensureSink(t *T) *callbackSink {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink == nil {
		s, err := startSink(r.cfg.CallbackListen, r.cfg.CallbackURL)
		if err != nil {
			t.Failf("%v", err)
		}
		r.sink = s
	}
	return r.sink
}

func (r *toolRun) authorize(req *http.Request) {
	if r.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
	}
}

// reply is an answer the server gave to one of the kit's requests.
type reply struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

// post sends body (raw bytes) as JSON to u, with the server's token unless
// noAuth and the extra headers (name, value, ...), and returns the answer;
// err is a transport error.
func (r *toolRun) post(t *T, u string, body []byte, noAuth bool, extra ...string) (reply, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if !noAuth {
		r.authorize(req)
	}
	start := time.Now()
	resp, err := t.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	took := time.Since(start)
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return reply{status: resp.StatusCode, header: resp.Header, body: b, took: took}, nil
}

// postJSON marshals v and posts it; it fails the check on a transport
// error.
func (r *toolRun) postJSON(t *T, u string, v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		t.Failf("the kit could not encode its request: %v", err)
	}
	rep, err := r.post(t, u, b, false)
	if err != nil {
		t.Failf("POST %s: %v (is the server running and reachable?)", u, err)
	}
	return rep
}

// invocation returns a fresh invocation of call, its callback URL that of
// a new inbox owned by t.
func (r *toolRun) invocation(t *T, tool string, args json.RawMessage) (map[string]any, *inbox) {
	ib := r.ensureSink(t).newInbox(t)
	if args == nil {
		args = json.RawMessage(`{}`)
	}
	inv := map[string]any{
		"operation":    tool,
		"arguments":    args,
		"id":           "conformance-call-" + randomToken(6),
		"call_id":      "conformance-model-call-" + randomToken(6),
		"callback_url": ib.url,
		"group_id":     "conformance-thread-" + randomToken(6),
		"user_id":      nil,
	}
	return inv, ib
}

// invoke posts inv to the invocation endpoint and fails the check unless
// it is acknowledged 200.
func (r *toolRun) invoke(t *T, inv map[string]any) reply {
	rep := r.postJSON(t, r.endpointURL(t), inv)
	if rep.status != http.StatusOK {
		t.Failf("the invocation of %q was answered %d, not 200 (%s)", inv["operation"], rep.status, snippet(rep.body))
	}
	return rep
}

// endpointURL is where invocations go; the check is skipped when
// discovery did not yield one.
func (r *toolRun) endpointURL(t *T) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Endpoint != "" {
		return r.cfg.Endpoint
	}
	if r.endpoint == "" {
		t.Skipf("no usable endpoint: the toolset document was not read or its endpoint is not a URL")
	}
	return r.endpoint
}

// goodCall returns a call whose result arrives, or skips the check.
func (r *toolRun) goodCall(t *T) allowedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.good == nil {
		t.Skipf("no tool may be called whose result arrives (see tool.result.delivered); allow one with --call NAME=JSON")
	}
	return *r.good
}

// awaitResult waits for the inbox's tool_result, skipping other message
// types, and fails the check when none arrives.
func (r *toolRun) awaitResult(t *T, ib *inbox, what string) received {
	deadline := time.Now().Add(r.cfg.ResultWait)
	for {
		rec, ok := ib.next(t.Context(), time.Until(deadline))
		if !ok {
			t.Failf("no tool_result for %s arrived within %s (RAP IN-4: every invocation ends in a tool_result)", what, r.cfg.ResultWait)
		}
		if rec.msgType() == "tool_result" || rec.msg == nil {
			return rec
		}
	}
}

// resultText returns a tool_result's text, or its content's text items
// joined.
func resultText(m map[string]any) string {
	if s, ok := m["text"].(string); ok && s != "" {
		return s
	}
	var parts []string
	if items, ok := m["content"].([]any); ok {
		for _, it := range items {
			if o, ok := it.(map[string]any); ok {
				if s, ok := o["text"].(string); ok {
					parts = append(parts, s)
				}
			}
		}
	}
	return strings.Join(parts, "\n")
}

// snippet returns the start of a body, for messages.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "empty body"
	}
	return fmt.Sprintf("%q", s)
}

// allowedCalls returns the allowed calls in name order: the configured ones
// that the toolset has, then, unless NoDefaultCalls, its read-only tools
// that need no arguments.
func (r *toolRun) allowedCalls(tools []toolDef) (calls []allowedCall, unknown []string) {
	have := map[string]bool{}
	for _, td := range tools {
		have[td.Name] = true
	}
	for name, args := range r.cfg.Calls {
		if !have[name] {
			unknown = append(unknown, name)
			continue
		}
		calls = append(calls, allowedCall{Tool: name, Args: args})
	}
	if !r.cfg.NoDefaultCalls {
		for _, td := range tools {
			if _, set := r.cfg.Calls[td.Name]; set {
				continue
			}
			if ro, _ := td.Annotations["readOnly"].(bool); !ro {
				continue
			}
			if d, _ := td.Annotations["destructive"].(bool); d {
				continue
			}
			if req, _ := td.Schema["required"].([]any); len(req) > 0 {
				continue
			}
			calls = append(calls, allowedCall{Tool: td.Name, Args: json.RawMessage(`{}`)})
		}
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].Tool < calls[j].Tool })
	sort.Strings(unknown)
	return calls, unknown
}

// validHTTPURL reports whether u is an absolute http or https URL.
func validHTTPURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}
