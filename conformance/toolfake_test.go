package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTool is a small hand-written RAP tool server that conforms to every
// check of ToolSuite, unless broken names the one check it fails: each
// breakage is one realistic mistake.
type fakeTool struct {
	broken string
	token  string
	srv    *httptest.Server
	client *http.Client

	deliver sync.Mutex // held while a callback is sent, when broken so
	mu      sync.Mutex
	subs    map[string]context.CancelFunc // by group_id + id
	pending map[string]string             // call state by group_id + id
	wg      sync.WaitGroup
}

const fakeToken = "conformance-test-token"

func newFakeTool(t *testing.T, broken string) *fakeTool {
	f := &fakeTool{broken: broken, token: fakeToken, subs: map[string]context.CancelFunc{}, pending: map[string]string{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(func() {
		f.mu.Lock()
		for _, c := range f.subs {
			c()
		}
		f.mu.Unlock()
		f.srv.CloseClientConnections()
		f.srv.Close()
		f.wg.Wait()
	})
	return f
}

func (f *fakeTool) is(id string) bool { return f.broken == id }

func (f *fakeTool) manifest() map[string]any {
	obj := func(props map[string]any, req ...string) map[string]any {
		m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(req) > 0 {
			m["required"] = req
		}
		return m
	}
	noArgs := map[string]any{"type": "object", "additionalProperties": false}
	if f.is("tool.toolset.no-params-schema") {
		noArgs = map[string]any{"type": "object"}
	}
	tools := []any{
		map[string]any{"name": "countdown", "description": "Three events, then a final one.", "inputSchema": noArgs},
		map[string]any{"name": "echo", "description": "Echoes text.", "inputSchema": obj(map[string]any{"text": map[string]any{"type": "string"}}, "text")},
		map[string]any{"name": "now", "description": "The time.", "inputSchema": noArgs, "annotations": map[string]any{"readOnly": true}},
		map[string]any{"name": "ticker", "description": "Ticks until cancelled.", "inputSchema": noArgs},
	}
	if f.is("tool.toolset.tools") {
		tools = append(tools, map[string]any{"name": "nodescription", "inputSchema": noArgs})
	}
	if f.is("tool.toolset.names") {
		tools = append(tools, map[string]any{"name": "echo.v2", "description": "Echoes.", "inputSchema": noArgs})
	}
	name := "fake"
	if f.is("tool.toolset.fields") {
		name = ""
	}
	return map[string]any{"name": name, "endpoint": f.srv.URL + "/invoke", "tools": tools, "needsMigration": true}
}

func (f *fakeTool) authorized(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+f.token
}

func (f *fakeTool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/rap-toolset":
		if f.is("tool.discovery.document") {
			http.NotFound(w, r)
			return
		}
		b, _ := json.Marshal(f.manifest())
		if f.is("tool.discovery.content-type") {
			w.Header().Set("Content-Type", "text/plain")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = w.Write(b)
		return
	case r.Method != http.MethodPost:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if !f.authorized(r) && !(f.is("tool.auth.required") && r.URL.Path == "/close_thread") {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/invoke":
		f.serveInvoke(w, body, r.Header.Get("Traceparent"))
	case "/close_thread":
		var req struct {
			ThreadID string `json:"thread_id"`
		}
		_ = json.Unmarshal(body, &req)
		switch {
		case f.is("tool.close.unknown"):
			http.Error(w, "no such thread", http.StatusNotFound)
		case f.is("tool.close.hostile-ids") && strings.ContainsRune(req.ThreadID, 0):
			panic(http.ErrAbortHandler) // the connection drops, as a crash would
		case f.is("tool.close.empty-body"):
			_, _ = w.Write([]byte("OK"))
		}
	case "/cancel_tool_call":
		var req struct {
			ThreadID   string `json:"thread_id"`
			ToolCallID string `json:"tool_call_id"`
		}
		_ = json.Unmarshal(body, &req)
		switch {
		case f.is("tool.cancel.unknown"):
			http.Error(w, "no such call", http.StatusNotFound)
			return
		case f.is("tool.cancel.hostile-ids") && strings.Contains(req.ThreadID, ".."):
			http.Error(w, "bad id", http.StatusBadRequest)
			return
		}
		if !f.is("tool.subscription.cancel") {
			f.mu.Lock()
			if c := f.subs[req.ThreadID+"\x00"+req.ToolCallID]; c != nil {
				c()
			}
			f.mu.Unlock()
		}
	case "/migrate":
		var req struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(body, &req)
		if req.SessionID == "" && !f.is("tool.migrate.endpoint") {
			http.Error(w, "session_id is required", http.StatusBadRequest)
		}
	case "/tool_call_status":
		var req struct {
			ThreadID   string `json:"thread_id"`
			ToolCallID string `json:"tool_call_id"`
		}
		_ = json.Unmarshal(body, &req)
		f.mu.Lock()
		st := f.pending[req.ThreadID+"\x00"+req.ToolCallID]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if st == "" || f.is("tool.status.pending") {
			if !f.is("tool.status.unknown") {
				w.WriteHeader(http.StatusNotFound)
			}
			st = "unknown"
		}
		_, _ = fmt.Fprintf(w, `{"tool_call_id":%q,"status":%q}`, req.ToolCallID, st)
	default:
		http.NotFound(w, r)
	}
}

type fakeInvocation struct {
	Operation       string          `json:"operation"`
	Arguments       json.RawMessage `json:"arguments"`
	ID              string          `json:"id"`
	CallID          *string         `json:"call_id"`
	CallbackURL     string          `json:"callback_url"`
	GroupID         string          `json:"group_id"`
	ThreadAncestors []string        `json:"thread_ancestors"`
	UserID          *string         `json:"user_id"`
	traceParent     string
}

func (f *fakeTool) serveInvoke(w http.ResponseWriter, body []byte, traceParent string) {
	inv := fakeInvocation{traceParent: traceParent}
	if err := json.Unmarshal(body, &inv); err != nil {
		if f.is("tool.invoke.not-json") {
			return // 200, and nothing
		}
		http.Error(w, "invalid invocation: "+err.Error(), http.StatusBadRequest)
		return
	}
	if f.is("tool.invoke.malformed") && !bytes.HasPrefix(bytes.TrimSpace(inv.Arguments), []byte("{")) {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw)
	switch {
	case inv.CallbackURL == "" || inv.ID == "" || inv.GroupID == "":
		http.Error(w, "callback_url, id and group_id are required", http.StatusBadRequest)
		return
	case f.is("tool.invoke.user-id") && raw["user_id"] == nil:
		http.Error(w, "user_id is required", http.StatusBadRequest)
		return
	case f.is("tool.invoke.thread-ancestors") && inv.ThreadAncestors != nil:
		http.Error(w, "unexpected thread_ancestors", http.StatusBadRequest)
		return
	}
	known := map[string]bool{"countdown": true, "echo": true, "now": true, "ticker": true}
	if !known[inv.Operation] && f.is("tool.invoke.unknown-operation") {
		http.Error(w, "no such tool", http.StatusNotFound)
		return
	}
	if known[inv.Operation] && f.is("tool.ack.status") {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	key := inv.GroupID + "\x00" + inv.ID
	f.mu.Lock()
	f.pending[key] = "running"
	f.mu.Unlock()
	if f.is("tool.callback.slow-endpoint") {
		// A server that shares one lock between answering and delivering.
		f.deliver.Lock()
		//lint:ignore SA2001 waiting for a delivery under way is the breakage
		f.deliver.Unlock()
	}
	if f.is("tool.ack.time") && known[inv.Operation] {
		time.Sleep(600 * time.Millisecond)
	}
	if f.is("tool.ack.before-work") && (inv.Operation == "echo" || inv.Operation == "now") {
		f.run(inv)
		return
	}
	w.WriteHeader(http.StatusOK)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.run(inv)
	}()
}

// run does the invocation's work and delivers its messages.
func (f *fakeTool) run(inv fakeInvocation) {
	key := inv.GroupID + "\x00" + inv.ID
	defer func() {
		f.mu.Lock()
		delete(f.pending, key)
		f.mu.Unlock()
	}()
	result := map[string]any{"type": "tool_result", "group_id": inv.GroupID, "id": inv.ID}
	if inv.CallID != nil && !f.is("tool.callback.call-id") {
		result["call_id"] = *inv.CallID
	}
	errorText := func(s string) string {
		if f.is("tool.result.error-prefix") {
			return "error - " + s
		}
		return "Error: " + s
	}
	var args map[string]any
	if err := json.Unmarshal(inv.Arguments, &args); err != nil || args == nil {
		result["text"] = errorText(`"arguments" must be an object; send {} for no arguments`)
		f.send(inv, result)
		return
	}
	switch inv.Operation {
	case "echo":
		text, ok := args["text"].(string)
		if !ok && !f.is("tool.invoke.invalid-arguments") {
			result["text"] = errorText(`echo needs "text", a string`)
		} else {
			result["text"] = "echo: " + text
		}
	case "now":
		result["text"] = time.Now().UTC().Format(time.RFC3339)
	case "countdown", "ticker":
		f.subscribe(inv, result)
		return
	default:
		result["text"] = errorText(fmt.Sprintf("no tool %q here; use echo, now, countdown or ticker", inv.Operation))
	}
	if !f.is("tool.result.delivered") || inv.Operation == "" || strings.HasPrefix(inv.Operation, "conformance_") {
		f.send(inv, result)
	}
	if f.is("tool.callback.single-result") {
		result["text"] = "and once more"
		f.send(inv, result)
	}
}

func (f *fakeTool) subscribe(inv fakeInvocation, confirm map[string]any) {
	key := inv.GroupID + "\x00" + inv.ID
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.mu.Lock()
	f.subs[key] = cancel
	f.mu.Unlock()
	confirm["subscription"] = true
	if f.is("tool.subscription.confirm") {
		confirm["subscription"] = "true"
	}
	confirm["text"] = "Subscribed; subscription id " + inv.ID
	f.send(inv, confirm)
	event := func(n int, final bool) map[string]any {
		id := inv.ID
		if f.is("tool.subscription.events") {
			id = "call-" + inv.GroupID
		}
		return map[string]any{"type": "subscription_event", "group_id": inv.GroupID, "tool_call_id": id,
			"text": fmt.Sprintf(`{"n":%d}`, n), "final": final}
	}
	every := 100 * time.Millisecond
	if inv.Operation == "countdown" {
		every = 50 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		final := inv.Operation == "countdown" && n == 3
		f.send(inv, event(n, final))
		if final {
			if f.is("tool.subscription.final") {
				f.send(inv, event(n+1, false))
			}
			return
		}
	}
}

// send posts msg to the invocation's callback URL, retrying on 5xx.
func (f *fakeTool) send(inv fakeInvocation, msg map[string]any) {
	b, _ := json.Marshal(msg)
	u := inv.CallbackURL
	if f.is("tool.callback.url") {
		u, _, _ = strings.Cut(u, "?")
	}
	if f.is("tool.callback.slow-endpoint") || f.is("tool.callback.oversized-answer") {
		// One delivery at a time.
		f.deliver.Lock()
		defer f.deliver.Unlock()
	}
	key := inv.GroupID + "\x00" + inv.ID
	for attempt := 1; attempt <= 5; attempt++ {
		f.mu.Lock()
		if _, ok := f.pending[key]; ok {
			f.pending[key] = "delivering"
		}
		f.mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
		ct := "application/json"
		if f.is("tool.callback.shape") {
			ct = "text/plain"
		}
		req.Header.Set("Content-Type", ct)
		if f.is("tool.callback.idempotency-key") {
			req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", inv.ID, attempt))
		} else {
			req.Header.Set("Idempotency-Key", inv.ID+"-"+fmt.Sprint(len(b)))
		}
		if inv.traceParent != "" {
			tp := inv.traceParent
			if f.is("tool.callback.traceparent") {
				tp = "00-" + strings.Repeat("ab", 16) + "-" + strings.Repeat("cd", 8) + "-01"
			}
			req.Header.Set("Traceparent", tp)
		}
		resp, err := f.client.Do(req)
		if err == nil {
			if f.is("tool.callback.oversized-answer") {
				_, _ = io.Copy(io.Discard, resp.Body) // reads all of any answer
			} else {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			}
			resp.Body.Close()
		}
		switch {
		case err == nil && resp.StatusCode < 300:
			return
		case err == nil && resp.StatusCode < 500 && !f.is("tool.callback.no-retry-4xx"):
			return
		case f.is("tool.callback.retry-5xx"):
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fakeConfig(f *fakeTool) ToolConfig {
	return ToolConfig{
		BaseURL: f.srv.URL, Token: fakeToken,
		Calls: map[string]json.RawMessage{
			"echo": json.RawMessage(`{"text":"hi"}`), "countdown": json.RawMessage(`{}`), "ticker": json.RawMessage(`{}`),
		},
		ResultWait: 10 * time.Second, RetryWait: 5 * time.Second, QuietWait: 1500 * time.Millisecond, StallFor: 4 * time.Second,
	}
}

func runFake(t *testing.T, broken string) *Report {
	f := newFakeTool(t, broken)
	cfg := fakeConfig(f)
	if broken == "tool.ack.time" {
		cfg.AckWithin = 300 * time.Millisecond // the broken server takes 600 ms
	}
	return ToolSuite(cfg).Run(context.Background(), RunOptions{Subject: f.srv.URL, CheckTimeout: time.Minute})
}

func failedIDs(rep *Report) []string {
	var ids []string
	for _, res := range rep.Results {
		if res.Status == Fail {
			ids = append(ids, res.ID)
		}
	}
	return ids
}

func reportText(rep *Report) string {
	var b strings.Builder
	_ = rep.WriteText(&b, true)
	return b.String()
}

// TestToolSuiteConformingServerPassesEveryCheck: a tool server that does
// everything the protocol asks passes every check, none skipped.
func TestToolSuiteConformingServerPassesEveryCheck(t *testing.T) {
	rep := runFake(t, "")
	for _, res := range rep.Results {
		if res.Status != Pass {
			t.Errorf("%s: %s", res.ID, res.Status)
		}
	}
	if t.Failed() {
		t.Log(reportText(rep))
	}
}

// TestToolSuiteEachBreakageFailsExactlyItsCheck: for every check, a tool
// server broken in exactly that way fails that check and no other (the
// checks that depend on it may be skipped).
func TestToolSuiteEachBreakageFailsExactlyItsCheck(t *testing.T) {
	checks := ToolSuite(ToolConfig{}).Checks()
	// The runs wait more than they work: run them all at once.
	reps := make([]*Report, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i] = runFake(t, c.ID)
		}()
	}
	wg.Wait()
	for i, c := range checks {
		t.Run(c.ID, func(t *testing.T) {
			failed := failedIDs(reps[i])
			if len(failed) != 1 || failed[0] != c.ID {
				t.Errorf("failed %v, want exactly [%s]\n%s", failed, c.ID, reportText(reps[i]))
			}
			// The others pass, but for the checks that need the broken
			// one (directly or through another): those say so.
			for _, res := range reps[i].Results {
				if res.Status == Skip && !strings.HasPrefix(res.Message, "needs check ") {
					t.Errorf("%s was skipped: %s", res.ID, res.Message)
				}
			}
		})
	}
}
