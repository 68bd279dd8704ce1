package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// fakeRuntime is a small RAP runtime played by the test: a driver whose
// every action (an invocation, a cancellation, a closure, a choice's
// answer) is done before the driver's call returns, and a callback
// endpoint. Each entry of broken makes it break one rule, so that a test
// can see that exactly the check of that rule fails.
type fakeRuntime struct {
	t        testing.TB
	kit      *RuntimeKit
	srv      *httptest.Server
	broken   map[string]bool
	endpoint string

	mu    sync.Mutex
	n     int
	convs map[string][]api.Message
	calls map[string]*fakeCall // by token
	asked map[string][]fakeChoice
}

type fakeCall struct {
	id, conv, token    string
	pending, cancelled bool
	confirmed          bool
	held               []string
}

type fakeChoice struct {
	callID, prompt, responseURL string
}

// The ways a fakeRuntime can be broken.
const (
	brokenNoDiscovery     = "no-discovery"        // invokes the endpoint without fetching the manifest
	brokenNoGroupID       = "no-group-id"         // the "fields" invocation has no group_id
	brokenTextPlain       = "text-plain"          // invocations say Content-Type: text/plain
	brokenNoAncestors     = "no-ancestors"        // a child's invocation has no thread_ancestors
	brokenNoRetry         = "no-retry"            // a 503 is not retried
	brokenRetry4xx        = "retry-4xx"           // a 400 is retried
	brokenDuplicate       = "inject-duplicate"    // a redelivered result is added again
	brokenInjectUnknown   = "inject-unknown"      // a result for another id is added
	brokenSharedURL       = "shared-url"          // one callback URL for every call, no token
	brokenNoChoiceAnswer  = "no-choice-answer"    // the choice's answer is never POSTed
	brokenOAuthEndsCall   = "oauth-ends-call"     // an oauth callback ends the call
	brokenView500         = "view-500"            // a view_update is answered 500
	brokenDropEarly       = "drop-early"          // an event before the confirmation is dropped
	brokenDropEvents      = "drop-events"         // events of a confirmed subscription are dropped
	brokenNoCancel        = "no-cancel"           // an interrupted call gets no /cancel_tool_call
	brokenInjectLate      = "inject-late"         // a result of a cancelled call is added
	brokenNoClose         = "no-close"            // closing sends no /close_thread
	brokenNoMigrate       = "no-migrate"          // a move calls no /migrate
	brokenCancelWrongConv = "cancel-wrong-thread" // /cancel_tool_call names another thread
)

func newFakeRuntime(t testing.TB, kit *RuntimeKit, broken ...string) *fakeRuntime {
	f := &fakeRuntime{t: t, kit: kit, broken: map[string]bool{}, convs: map[string][]api.Message{},
		calls: map[string]*fakeCall{}, asked: map[string][]fakeChoice{}}
	for _, b := range broken {
		f.broken[b] = true
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.callback))
	t.Cleanup(f.srv.Close)
	f.endpoint = kit.URL() + "/invoke"
	if !f.broken[brokenNoDiscovery] {
		resp, err := http.Get(kit.URL() + "/.well-known/rap-toolset")
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Endpoint string }
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err != nil || m.Endpoint == "" {
			t.Fatalf("the kit's manifest has no endpoint: %v", err)
		}
		f.endpoint = m.Endpoint
	}
	return f
}

func (f *fakeRuntime) post(url, contentType string, body any) int {
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, contentType, bytes.NewReader(b))
	if err != nil {
		f.t.Errorf("fake runtime: POST %s: %v", url, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	stepRE = regexp.MustCompile(`\[step:([a-z-]+)\]`)
	toolRE = regexp.MustCompile(`Call the tool (\S+)`)
)

func (f *fakeRuntime) start(_ context.Context, _, text string) (string, error) {
	step, tool := stepRE.FindStringSubmatch(text), toolRE.FindStringSubmatch(text)
	if step == nil || tool == nil {
		return "", fmt.Errorf("fake runtime: no step in %q", text)
	}
	f.mu.Lock()
	f.n++
	conv := fmt.Sprintf("thread-%d", f.n)
	f.mu.Unlock()
	if step[1] == "child" {
		child := conv + "-child"
		f.invoke(child, []string{conv}, tool[1], step[1])
		return conv, nil
	}
	f.invoke(conv, nil, tool[1], step[1])
	return conv, nil
}

func (f *fakeRuntime) invoke(conv string, ancestors []string, tool, step string) {
	f.mu.Lock()
	f.n++
	c := &fakeCall{id: fmt.Sprintf("call-%d", f.n), conv: conv, token: token(), pending: true}
	f.calls[c.token] = c
	f.mu.Unlock()
	url := f.srv.URL + "/cb/" + c.token
	if f.broken[brokenSharedURL] {
		url = f.srv.URL + "/callback"
	}
	inv := map[string]any{"operation": tool, "arguments": map[string]any{"step": step}, "id": c.id, "call_id": nil,
		"callback_url": url, "group_id": conv, "user_id": nil}
	if len(ancestors) > 0 && !f.broken[brokenNoAncestors] {
		inv["thread_ancestors"] = ancestors
	}
	if step == "fields" && f.broken[brokenNoGroupID] {
		delete(inv, "group_id")
	}
	ct := "application/json"
	if f.broken[brokenTextPlain] {
		ct = "text/plain"
	}
	status := f.post(f.endpoint, ct, inv)
	if status >= 500 && !f.broken[brokenNoRetry] {
		status = f.post(f.endpoint, ct, inv)
	}
	if status >= 400 && status < 500 && f.broken[brokenRetry4xx] {
		status = f.post(f.endpoint, ct, inv)
	}
	if status != http.StatusOK {
		f.mu.Lock()
		c.pending = false
		f.addResult(conv, c.id, fmt.Sprintf("Error: the tool answered %d", status), true)
		f.mu.Unlock()
	}
}

// addResult adds a tool result; f.mu is held.
func (f *fakeRuntime) addResult(conv, id, text string, isErr bool) {
	f.convs[conv] = append(f.convs[conv], api.Message{ThreadID: conv, Role: api.RoleTool,
		ToolResults: []api.ToolResult{{CallID: id, Text: text, IsError: isErr}}})
}

func (f *fakeRuntime) callback(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Type, GroupID, ID, ToolCallID, Text, Prompt, ResponseURL string
		Subscription                                             bool
	}
	body, _ := io.ReadAll(r.Body)
	var raw map[string]any
	if json.Unmarshal(body, &raw) != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	str := func(k string) string { s, _ := raw[k].(string); return s }
	msg.Type, msg.GroupID, msg.ID, msg.ToolCallID, msg.Text = str("type"), str("group_id"), str("id"), str("tool_call_id"), str("text")
	msg.Prompt, msg.ResponseURL = str("prompt"), str("response_url")
	msg.Subscription, _ = raw["subscription"].(bool)
	id := msg.ID
	switch msg.Type {
	case "subscription_event":
		id = msg.ToolCallID
	case "view_update":
		id = "" // a view update names the thread only (RAP VU-1)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var c *fakeCall
	if f.broken[brokenSharedURL] {
		for _, x := range f.calls {
			if x.id == id || (id == "" && x.conv == msg.GroupID) {
				c = x
			}
		}
	} else {
		c = f.calls[strings.TrimPrefix(r.URL.Path, "/cb/")]
	}
	if c == nil {
		http.Error(w, "unknown token", http.StatusForbidden)
		return
	}
	if id == "" && msg.Type == "view_update" {
		id = c.id
	}
	if id != c.id {
		if f.broken[brokenInjectUnknown] {
			f.addResult(c.conv, id, msg.Text, false)
			return
		}
		http.Error(w, "id does not match the token", http.StatusForbidden)
		return
	}
	switch msg.Type {
	case "tool_result":
		switch {
		case c.cancelled:
			if f.broken[brokenInjectLate] {
				f.addResult(c.conv, c.id, msg.Text, false)
			}
		case !c.pending:
			if f.broken[brokenDuplicate] {
				f.addResult(c.conv, c.id, msg.Text, false)
			}
		default:
			c.pending = false
			f.addResult(c.conv, c.id, msg.Text, false)
			if msg.Subscription {
				c.confirmed = true
				for _, e := range c.held {
					f.addResult(c.conv, c.id, e, false)
				}
			}
		}
	case "subscription_event":
		switch {
		case c.pending && !f.broken[brokenDropEarly]:
			c.held = append(c.held, msg.Text)
		case c.confirmed && !f.broken[brokenDropEvents]:
			f.addResult(c.conv, c.id, msg.Text, false)
		}
	case "oauth":
		if f.broken[brokenOAuthEndsCall] {
			c.pending = false
		}
	case "user_choice":
		f.asked[c.conv] = append(f.asked[c.conv], fakeChoice{callID: c.id, prompt: msg.Prompt, responseURL: msg.ResponseURL})
	case "view_update":
		if f.broken[brokenView500] {
			http.Error(w, "view updates are not supported", http.StatusInternalServerError)
			return
		}
	default:
		http.Error(w, "unknown type", http.StatusBadRequest)
	}
}

func (f *fakeRuntime) say(_ context.Context, conv, _ string) error {
	f.mu.Lock()
	var cancelled []*fakeCall
	for _, c := range f.calls {
		if c.conv == conv && c.pending {
			c.pending, c.cancelled = false, true
			f.addResult(conv, c.id, "Interrupted", true)
			cancelled = append(cancelled, c)
		}
	}
	f.mu.Unlock()
	for _, c := range cancelled {
		thread := conv
		if f.broken[brokenCancelWrongConv] {
			thread = "another-thread"
		}
		if !f.broken[brokenNoCancel] {
			f.post(f.kit.URL()+"/cancel_tool_call", "application/json", map[string]string{"thread_id": thread, "tool_call_id": c.id})
		}
	}
	return nil
}

func (f *fakeRuntime) close(_ context.Context, conv string) error {
	if !f.broken[brokenNoClose] {
		f.post(f.kit.URL()+"/close_thread", "application/json", map[string]string{"thread_id": conv})
	}
	return nil
}

func (f *fakeRuntime) history(_ context.Context, conv string) ([]api.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.Message(nil), f.convs[conv]...), nil
}

func (f *fakeRuntime) thread(_ context.Context, conv string) (*api.ThreadInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	th := &api.ThreadInfo{}
	for _, c := range f.calls {
		if c.conv == conv && c.pending {
			th.PendingCalls = append(th.PendingCalls, api.Call{CallID: c.id, State: api.CallDispatched})
		}
	}
	return th, nil
}

func (f *fakeRuntime) choices(_ context.Context, conv string) ([]api.Choice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.Choice
	for _, c := range f.asked[conv] {
		out = append(out, api.Choice{CallID: c.callID, Prompt: c.prompt})
	}
	return out, nil
}

func (f *fakeRuntime) answerChoice(_ context.Context, conv, callID, _ string, selected int) error {
	f.mu.Lock()
	var url string
	for _, c := range f.asked[conv] {
		if c.callID == callID {
			url = c.responseURL
		}
	}
	f.mu.Unlock()
	if !f.broken[brokenNoChoiceAnswer] {
		f.post(url, "application/json", map[string]any{"id": callID, "selected": selected})
	}
	return nil
}

func (f *fakeRuntime) settle(context.Context, string) error { return nil }

func (f *fakeRuntime) move(_ context.Context, conv, to, _ string) error {
	if !f.broken[brokenNoMigrate] {
		f.post(f.kit.URL()+"/migrate", "application/json", map[string]string{"session_id": conv, "destination_url": to})
	}
	return nil
}
