package rap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// sdkWait bounds every wait in these tests: generous, because a busy
// 2-core machine can be slow, and never reached when the code is right.
const sdkWait = 15 * time.Second

// sdkSink is a callback endpoint that records every message it receives.
type sdkSink struct {
	t    testing.TB
	srv  *httptest.Server
	mu   sync.Mutex
	msgs []rap.Callback
	bad  []string
}

func newSDKSink(t testing.TB) *sdkSink {
	t.Helper()
	k := &sdkSink{t: t}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msg, err := rap.DecodeCallback(body)
		k.mu.Lock()
		defer k.mu.Unlock()
		if err != nil {
			k.bad = append(k.bad, err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		k.msgs = append(k.msgs, msg)
	}))
	t.Cleanup(k.srv.Close)
	return k
}

// URL is a callback URL with a token in it, as runtimes send (RAP TR-7).
func (k *sdkSink) URL() string { return k.srv.URL + "/cb?token=s3cret" }

// all returns the messages received so far.
func (k *sdkSink) all() []rap.Callback {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.bad) > 0 {
		k.t.Errorf("tool server sent malformed callbacks: %q", k.bad)
	}
	return append([]rap.Callback(nil), k.msgs...)
}

// forID returns the messages about invocation id (tool results, events,
// oauth, user choices), in arrival order.
func (k *sdkSink) forID(id string) []rap.Callback {
	var out []rap.Callback
	for _, m := range k.all() {
		switch m := m.(type) {
		case *rap.ToolResult:
			if m.ID == id {
				out = append(out, m)
			}
		case *rap.SubscriptionEvent:
			if m.ToolCallID == id {
				out = append(out, m)
			}
		case *rap.OAuth:
			if m.ID == id {
				out = append(out, m)
			}
		case *rap.UserChoice:
			if m.ID == id {
				out = append(out, m)
			}
		case *rap.UserInput:
			if m.ID == id {
				out = append(out, m)
			}
		}
	}
	return out
}

// waitFor polls until cond holds on the messages about id.
func (k *sdkSink) waitFor(id, what string, cond func([]rap.Callback) bool) []rap.Callback {
	k.t.Helper()
	deadline := time.Now().Add(sdkWait)
	for {
		msgs := k.forID(id)
		if cond(msgs) {
			return msgs
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("call %s: waited %v for %s; got %d messages: %s", id, sdkWait, what, len(msgs), sdkDescribe(msgs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// result waits for the tool result of id.
func (k *sdkSink) result(id string) *rap.ToolResult {
	k.t.Helper()
	var res *rap.ToolResult
	k.waitFor(id, "a tool_result", func(msgs []rap.Callback) bool {
		for _, m := range msgs {
			if r, ok := m.(*rap.ToolResult); ok {
				res = r
				return true
			}
		}
		return false
	})
	return res
}

func sdkDescribe(msgs []rap.Callback) string {
	var parts []string
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, ", ")
}

// sdkQuiet is a logger that drops everything.
func sdkQuiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// sdkFastRetry keeps redelivery quick in tests.
var sdkFastRetry = rap.RetryPolicy{Initial: 5 * time.Millisecond, Max: 100 * time.Millisecond}

// newSDKServer builds a started server with setup's tools, serves it over
// loopback HTTP, and shuts it down when the test ends.
func newSDKServer(t testing.TB, opts *rap.ServerOptions, setup func(*rap.Server)) (*rap.Server, *httptest.Server) {
	t.Helper()
	if opts == nil {
		opts = &rap.ServerOptions{}
	}
	if opts.Logger == nil {
		opts.Logger = sdkQuiet()
	}
	if opts.Retry == (rap.RetryPolicy{}) {
		opts.Retry = sdkFastRetry
	}
	s := rap.NewServer("sdk_test", opts)
	if setup != nil {
		setup(s)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
		defer cancel()
		_ = s.Shutdown(ctx)
		hs.Close()
	})
	return s, hs
}

// sdkInvocation returns an invocation body.
func sdkInvocation(op, id, group, callback string, args any) []byte {
	inv := map[string]any{"operation": op, "id": id, "group_id": group, "callback_url": callback, "arguments": args}
	if args == nil {
		inv["arguments"] = map[string]any{}
	}
	b, _ := json.Marshal(inv)
	return b
}

// sdkPost POSTs body to url and returns the status, the body and headers.
func sdkPost(t testing.TB, url string, body []byte, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{Timeout: sdkWait}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

func addEcho(s *rap.Server) {
	rap.AddTool(s, &rap.Tool{Name: "echo", Description: "Echo text."},
		func(ctx context.Context, c *rap.Call, in echoIn) (*rap.Reply, error) {
			return rap.Text(in.Text), nil
		})
}

// RAP TR-2, IN-3: the 200 arrives before the handler does any work. The
// handler blocks until the test has seen the 200; answering after the
// work would deadlock and fail on the deadline.
func TestAcknowledgeBeforeWork(t *testing.T) {
	sink := newSDKSink(t)
	seen200 := make(chan struct{})
	started := make(chan struct{})
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "slow", Description: "Waits for the test."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				close(started)
				select {
				case <-seen200:
					return rap.Text("worked after the ack"), nil
				case <-time.After(sdkWait):
					return nil, errors.New("the test never saw the 200")
				}
			})
	})
	status, body, _ := sdkPost(t, hs.URL, sdkInvocation("slow", "call_1", "thread_1", sink.URL(), nil))
	if status != http.StatusOK {
		t.Fatalf("invocation answered %d %q, want 200", status, body)
	}
	close(seen200)
	<-started
	if res := sink.result("call_1"); res.Text != "worked after the ack" {
		t.Errorf("result text %q, want %q", res.Text, "worked after the ack")
	}
}

// The pool is bounded: with its workers and queue full, an invocation
// gets 503 with Retry-After instead of waiting in an unbounded queue, and
// the accepted ones still complete.
func TestSaturatedPoolAnswers503(t *testing.T) {
	sink := newSDKSink(t)
	release := make(chan struct{})
	var running atomic.Int32
	_, hs := newSDKServer(t, &rap.ServerOptions{Workers: 1, Queue: 1}, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "block", Description: "Blocks."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				running.Add(1)
				<-release
				return rap.Text("done"), nil
			})
	})
	for _, id := range []string{"a", "b"} {
		if status, body, _ := sdkPost(t, hs.URL, sdkInvocation("block", id, "t", sink.URL(), nil)); status != http.StatusOK {
			t.Fatalf("invocation %s answered %d %q, want 200", id, status, body)
		}
	}
	status, body, hdr := sdkPost(t, hs.URL, sdkInvocation("block", "c", "t", sink.URL(), nil))
	if status != http.StatusServiceUnavailable {
		t.Fatalf("third invocation answered %d %q, want 503", status, body)
	}
	if hdr.Get("Retry-After") == "" {
		t.Error("503 has no Retry-After header")
	}
	if !strings.Contains(body, "busy") {
		t.Errorf("503 body %q does not say the server is busy", body)
	}
	// The worker starts the handler after the acknowledgement: wait for
	// it, then make sure no second one starts.
	deadline := time.Now().Add(sdkWait)
	for running.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if n := running.Load(); n != 1 {
		t.Errorf("%d handlers running with Workers=1", n)
	}
	close(release)
	sink.result("a")
	sink.result("b")
	// Capacity is back once the work is done.
	if status, body, _ := sdkPost(t, hs.URL, sdkInvocation("block", "d", "t", sink.URL(), nil)); status != http.StatusOK {
		t.Fatalf("invocation after the backlog cleared answered %d %q, want 200", status, body)
	}
	sink.result("d")
	if got := sink.forID("c"); len(got) != 0 {
		t.Errorf("refused invocation c got callbacks: %s", sdkDescribe(got))
	}
}

// RAP IN-3, IN-4, RE-4, TS-10: every failure after the acknowledgement is
// an ordinary tool result whose text starts with "Error: ", says what to
// do next, and holds no stack trace.
func TestFailuresBecomeErrorResults(t *testing.T) {
	var logs sdkLockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{Logger: logger}, func(s *rap.Server) {
		addEcho(s)
		rap.AddTool(s, &rap.Tool{Name: "fails", Description: "Returns an error."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				return nil, errors.New("the upstream API answered 502")
			})
		rap.AddTool(s, &rap.Tool{Name: "panics", Description: "Panics."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				var m map[string]int
				//lint:ignore SA5000 the tool panics on purpose
				m["boom"]++ // nil map write: a runtime panic
				return nil, nil
			})
	})
	tests := []struct {
		name, body string
		want       []string // substrings of the result text
	}{
		{"unknown operation", string(sdkInvocation("ehco", "u1", "t", sink.URL(), nil)),
			[]string{`unknown operation "ehco"`, "echo", "Reload the toolset"}},
		{"schema-invalid arguments", string(sdkInvocation("echo", "u2", "t", sink.URL(), map[string]any{"text": 5})),
			[]string{`invalid arguments for "echo"`, "arguments.text", "string", "call it again"}},
		{"missing required argument", string(sdkInvocation("echo", "u3", "t", sink.URL(), map[string]any{})),
			[]string{"missing required property \"text\"", "call it again"}},
		{"arguments not an object", `{"operation":"echo","id":"u4","group_id":"t","callback_url":"` + sink.URL() + `","arguments":[1,2]}`,
			[]string{"arguments", "JSON object", "call again"}},
		{"handler error", string(sdkInvocation("fails", "u5", "t", sink.URL(), nil)),
			[]string{`"fails" failed: the upstream API answered 502`, "try again"}},
		{"handler panic", string(sdkInvocation("panics", "u6", "t", sink.URL(), nil)),
			[]string{`"panics" failed unexpectedly`, "Try again"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := sdkPost(t, hs.URL, []byte(tc.body))
			if status != http.StatusOK {
				t.Fatalf("answered %d %q, want 200 (RAP IN-3)", status, body)
			}
			res := sink.result(fmt.Sprintf("u%d", i+1))
			if !strings.HasPrefix(res.Text, "Error: ") {
				t.Errorf("result %q does not start with \"Error: \" (RAP RE-4)", res.Text)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("result %q does not contain %q", res.Text, w)
				}
			}
			for _, leak := range []string{"goroutine", ".go:", "runtime error", "nil map"} {
				if strings.Contains(res.Text, leak) {
					t.Errorf("result %q leaks internals (%q)", res.Text, leak)
				}
			}
		})
	}
	if !strings.Contains(logs.String(), "panicked") || !strings.Contains(logs.String(), "nil map") {
		t.Errorf("the panic was not logged with its cause; log:\n%s", logs.String())
	}
}

type sdkLockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *sdkLockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *sdkLockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A payload that cannot be answered (no parse, no usable callback_url,
// group_id or id) gets 400 naming the problem, and the server keeps
// serving what it already accepted.
func TestUnanswerablePayloadsGet400(t *testing.T) {
	sink := newSDKSink(t)
	release := make(chan struct{})
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "wait", Description: "Waits."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				<-release
				return rap.Text("kept"), nil
			})
	})
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("wait", "accepted", "t", sink.URL(), nil)); status != http.StatusOK {
		t.Fatalf("valid invocation answered %d", status)
	}
	cb := sink.URL()
	tests := []struct{ name, body, want string }{
		{"not JSON", `{"operation":`, "not a JSON object"},
		{"array", `[1]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"empty", ``, "not a JSON object"},
		{"no callback_url", `{"operation":"wait","id":"x","group_id":"t","arguments":{}}`, "callback_url: missing"},
		{"callback_url not a string", `{"operation":"wait","id":"x","group_id":"t","arguments":{},"callback_url":7}`, "callback_url: must be a string"},
		{"callback_url ftp", `{"operation":"wait","id":"x","group_id":"t","arguments":{},"callback_url":"ftp://h/x"}`, `scheme "ftp"`},
		{"callback_url relative", `{"operation":"wait","id":"x","group_id":"t","arguments":{},"callback_url":"/cb"}`, "callback_url"},
		{"no group_id", `{"operation":"wait","id":"x","arguments":{},"callback_url":"` + cb + `"}`, "group_id: missing"},
		{"empty id", `{"operation":"wait","id":"","group_id":"t","arguments":{},"callback_url":"` + cb + `"}`, "id: must not be empty"},
		// A duplicate key makes even the callback URL ambiguous.
		{"duplicate callback_url", `{"operation":"wait","id":"x","group_id":"t","arguments":{},"callback_url":"` + cb + `","callback_url":"http://127.0.0.1:1/other"}`, "callback_url: appears more than once"},
		{"duplicate argument", `{"operation":"wait","id":"x","group_id":"t","arguments":{"a":1,"a":2},"callback_url":"` + cb + `"}`, "arguments.a: appears more than once"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := sdkPost(t, hs.URL, []byte(tc.body))
			if status != http.StatusBadRequest {
				t.Fatalf("answered %d %q, want 400", status, body)
			}
			if !strings.Contains(body, tc.want) {
				t.Errorf("400 body %q does not name the problem (%q)", body, tc.want)
			}
		})
	}
	close(release)
	if res := sink.result("accepted"); res.Text != "kept" {
		t.Errorf("accepted call's result %q, want %q", res.Text, "kept")
	}
	if got := sink.forID("x"); len(got) != 0 {
		t.Errorf("a refused payload produced callbacks: %s", sdkDescribe(got))
	}
}

// Bodies over MaxBodyBytes get 413 on every endpoint that reads one.
func TestOversizedBodyGets413(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{MaxBodyBytes: 512}, addEcho)
	big := sdkInvocation("echo", "big", "t", sink.URL(), map[string]any{"text": strings.Repeat("x", 1024)})
	if status, body, _ := sdkPost(t, hs.URL, big); status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "512-byte limit") {
		t.Errorf("oversized invocation answered %d %q, want 413 naming the limit", status, body)
	}
	if status, _, _ := sdkPost(t, hs.URL+"/user_choice_response", bytes.Repeat([]byte(" "), 1024)); status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized user choice response answered %d, want 413", status)
	}
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("echo", "small", "t", sink.URL(), map[string]any{"text": "hi"})); status != http.StatusOK {
		t.Fatalf("small invocation after the big one answered %d", status)
	}
	if res := sink.result("small"); res.Text != "hi" {
		t.Errorf("result %q, want hi", res.Text)
	}
	if got := sink.forID("big"); len(got) != 0 {
		t.Errorf("the refused invocation produced callbacks: %s", sdkDescribe(got))
	}
}

// RAP RE-1: the result echoes id, group_id and call_id, and each
// invocation gets exactly one result, even when the runtime resends it.
func TestResultEchoesIDsExactlyOnce(t *testing.T) {
	sink := newSDKSink(t)
	var runs atomic.Int32
	release := make(chan struct{})
	s, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "once", Description: "Counts runs."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				runs.Add(1)
				<-release
				return &rap.Reply{
					Text:      "ok",
					Content:   []rap.ContentItem{rap.TextContent("ok"), rap.ImageContent("aGk=", "image/png")},
					DisplayAs: []rap.DisplaySegment{rap.DiffSegment("a.go", "@@ -1 +1 @@")},
				}, nil
			})
	})
	body := `{"operation":"once","arguments":{},"id":"call_9","call_id":"model_9","group_id":"thread_9","callback_url":"` + sink.URL() + `","thread_ancestors":["root"],"user_id":"u"}`
	for range 2 { // the second is a runtime retry of the same call (RAP TR-3)
		if status, resp, _ := sdkPost(t, hs.URL, []byte(body)); status != http.StatusOK {
			t.Fatalf("answered %d %q", status, resp)
		}
	}
	close(release)
	res := sink.result("call_9")
	if res.ID != "call_9" || res.GroupID != "thread_9" || res.CallID != "model_9" {
		t.Errorf("result ids (id %q, group_id %q, call_id %q), want (call_9, thread_9, model_9)", res.ID, res.GroupID, res.CallID)
	}
	if len(res.Content) != 2 || res.Content[1].MediaType != "image/png" || len(res.DisplayAs) != 1 || res.DisplayAs[0].Type != "diff" {
		t.Errorf("content/display_as not delivered intact: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil { // waits for every handler and delivery
		t.Fatalf("Shutdown: %v", err)
	}
	if got := sink.forID("call_9"); len(got) != 1 {
		t.Errorf("%d callbacks for one invocation, want exactly 1: %s", len(got), sdkDescribe(got))
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times for one call id, want 1", n)
	}
}

// RAP CA-1, CA-2: /cancel_tool_call cancels the matching call's context
// (cause ErrCallCancelled), answers 200 with an empty body, and the call
// still ends in a result.
func TestCancelToolCallCancelsHandler(t *testing.T) {
	sink := newSDKSink(t)
	causes := make(chan error, 2)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "wait", Description: "Waits for cancellation."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				select {
				case <-ctx.Done():
					causes <- context.Cause(ctx)
					return nil, ctx.Err()
				case <-time.After(sdkWait):
					return rap.Text("not cancelled"), nil
				}
			})
	})
	for _, id := range []string{"c1", "c2"} {
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("wait", id, "thread_c", sink.URL(), nil)); status != http.StatusOK {
			t.Fatal("invocation refused")
		}
	}
	// Same tool_call_id in another thread: must not match.
	status, body, _ := sdkPost(t, hs.URL+"/cancel_tool_call", []byte(`{"thread_id":"other","tool_call_id":"c1"}`))
	if status != 200 || body != "" {
		t.Fatalf("cancel answered %d %q, want 200 and an empty body", status, body)
	}
	status, body, _ = sdkPost(t, hs.URL+"/cancel_tool_call", []byte(`{"thread_id":"thread_c","tool_call_id":"c1"}`))
	if status != 200 || body != "" {
		t.Fatalf("cancel answered %d %q, want 200 and an empty body", status, body)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, rap.ErrCallCancelled) {
			t.Errorf("cancel cause %v, want rap.ErrCallCancelled", cause)
		}
	case <-time.After(sdkWait):
		t.Fatal("the handler's context was not cancelled")
	}
	res := sink.result("c1")
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "cancelled") {
		t.Errorf("cancelled call's result %q, want an Error result saying it was cancelled", res.Text)
	}
	select {
	case cause := <-causes:
		t.Errorf("c2 was cancelled too (%v)", cause)
	case <-time.After(50 * time.Millisecond):
	}
	// Duplicates and unknown ids are fine (RAP CA-2).
	for range 2 {
		if status, body, _ := sdkPost(t, hs.URL+"/cancel_tool_call", []byte(`{"thread_id":"thread_c","tool_call_id":"c1"}`)); status != 200 || body != "" {
			t.Errorf("duplicate cancel answered %d %q", status, body)
		}
	}
}

// RAP TC-2: /close_thread cancels every call of that thread and no other.
func TestCloseThreadCancelsItsCalls(t *testing.T) {
	sink := newSDKSink(t)
	var mu sync.Mutex
	cancelled := map[string]error{}
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "wait", Description: "Waits."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				select {
				case <-ctx.Done():
					mu.Lock()
					cancelled[c.Invocation.ID] = context.Cause(ctx)
					mu.Unlock()
					return nil, ctx.Err()
				case <-time.After(sdkWait):
					return rap.Text("finished"), nil
				}
			})
	})
	for _, inv := range [][2]string{{"a1", "A"}, {"a2", "A"}, {"b1", "B"}} {
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("wait", inv[0], inv[1], sink.URL(), nil)); status != 200 {
			t.Fatal("invocation refused")
		}
	}
	status, body, _ := sdkPost(t, hs.URL+"/close_thread", []byte(`{"thread_id":"A"}`))
	if status != 200 || body != "" {
		t.Fatalf("close_thread answered %d %q, want 200 and an empty body", status, body)
	}
	for _, id := range []string{"a1", "a2"} {
		if res := sink.result(id); !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "thread was closed") {
			t.Errorf("%s result %q, want an Error result about the closed thread", id, res.Text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"a1", "a2"} {
		if !errors.Is(cancelled[id], rap.ErrThreadClosed) {
			t.Errorf("%s cause %v, want rap.ErrThreadClosed", id, cancelled[id])
		}
	}
	if _, ok := cancelled["b1"]; ok {
		t.Error("closing thread A cancelled b1 of thread B")
	}
}

// RAP TC-2, CA-2: both notification endpoints answer 200 with an empty
// body to anything authentic, and validate ids before using them: an id
// with a path separator, a control character or over 256 bytes is not
// acted on.
func TestNotificationsAlways200AndValidateIDs(t *testing.T) {
	sink := newSDKSink(t)
	cancelled := make(chan string, 4)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "wait", Description: "Waits."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				select {
				case <-ctx.Done():
					cancelled <- c.Invocation.ID
				case <-time.After(300 * time.Millisecond):
				}
				return rap.Text("done"), nil
			})
	})
	badIDs := []string{"../etc", `a\b`, "a\x00b", "a\nb", strings.Repeat("x", 257)}
	for i, id := range badIDs {
		// A call whose thread and id are exactly the unsafe strings.
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("wait", id, id, sink.URL(), nil)); status != 200 {
			t.Fatalf("invocation %d refused", i)
		}
	}
	var bodies []string
	for _, id := range badIDs {
		q, _ := json.Marshal(id)
		bodies = append(bodies,
			`{"thread_id":`+string(q)+`}`,
			`{"thread_id":`+string(q)+`,"tool_call_id":`+string(q)+`}`)
	}
	bodies = append(bodies, ``, `not json`, `{}`, `{"thread_id":5}`, `{"thread_id":"unknown"}`, `{"thread_id":"unknown","tool_call_id":"nope"}`)
	for _, path := range []string{"/close_thread", "/cancel_tool_call"} {
		for _, b := range bodies {
			status, body, _ := sdkPost(t, hs.URL+path, []byte(b))
			if status != 200 || body != "" {
				t.Errorf("POST %s %q answered %d %q, want 200 and an empty body", path, b, status, body)
			}
		}
	}
	for _, id := range badIDs {
		sink.result(id)
	}
	select {
	case id := <-cancelled:
		t.Errorf("a notification with the unsafe id %q was acted on", id)
	default:
	}
}

// RAP CA-3: with a bearer token, every endpoint but discovery requires it.
func TestBearerTokenRequired(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{
		BearerToken: "tok-123",
		Migrator:    func(context.Context, *rap.MigrateRequest) error { return nil },
	}, addEcho)
	resp, err := http.Get(hs.URL + rap.WellKnownPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("discovery without a token answered %d, want 200", resp.StatusCode)
	}
	inv := sdkInvocation("echo", "auth1", "t", sink.URL(), map[string]any{"text": "x"})
	endpoints := map[string][]byte{
		"/":                 inv,
		"/invoke":           inv,
		"/close_thread":     []byte(`{"thread_id":"t"}`),
		"/cancel_tool_call": []byte(`{"thread_id":"t","tool_call_id":"auth1"}`),
		"/migrate":          []byte(`{"session_id":"s","destination_url":"http://127.0.0.1:1"}`),
	}
	for path, body := range endpoints {
		for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "tok-123"}, {"Authorization", "Basic tok-123"}} {
			status, msg, h := sdkPost(t, hs.URL+path, body, hdr...)
			if status != http.StatusUnauthorized {
				t.Errorf("POST %s with %v answered %d, want 401", path, hdr, status)
			}
			if strings.Contains(msg, "tok-123") {
				t.Errorf("401 body %q reveals the token", msg)
			}
			if h.Get("WWW-Authenticate") == "" {
				t.Errorf("POST %s: 401 without WWW-Authenticate", path)
			}
		}
	}
	if got := sink.forID("auth1"); len(got) != 0 {
		t.Fatalf("unauthenticated invocation produced callbacks: %s", sdkDescribe(got))
	}
	for path, body := range endpoints {
		if status, msg, _ := sdkPost(t, hs.URL+path, body, "Authorization", "Bearer tok-123"); status != 200 {
			t.Errorf("POST %s with the token answered %d %q, want 200", path, status, msg)
		}
	}
	if res := sink.result("auth1"); res.Text != "x" {
		t.Errorf("result %q, want x", res.Text)
	}
}

// RAP TS-1, TS-4, TS-8: discovery serves a valid manifest whose endpoint
// is the base URL the request reached when the author left it empty.
func TestDiscovery(t *testing.T) {
	type searchIn struct {
		Query string `json:"query" jsonschema:"what to look for"`
		Limit int    `json:"limit,omitempty"`
	}
	setup := func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "search", Description: "Search.", Annotations: &rap.Annotations{ReadOnly: true}},
			func(ctx context.Context, c *rap.Call, in searchIn) (*rap.Reply, error) {
				return rap.Text(in.Query), nil
			})
		rap.AddTool(s, &rap.Tool{Name: "ping", Description: "No parameters."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) { return rap.Text("pong"), nil })
	}
	_, hs := newSDKServer(t, &rap.ServerOptions{Description: "Test tools."}, setup)
	get := func(url string, header ...string) (*rap.Toolset, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("discovery answered %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		ts, err := rap.ParseToolset(body)
		if err != nil {
			t.Fatalf("the served manifest does not validate: %v\n%s", err, body)
		}
		return ts, body
	}
	ts, raw := get(hs.URL + rap.WellKnownPath)
	if ts.Endpoint != hs.URL {
		t.Errorf("endpoint %q, want the request's base URL %q", ts.Endpoint, hs.URL)
	}
	if ts.Name != "sdk_test" || ts.Description != "Test tools." || len(ts.Tools) != 2 || ts.Tools[0].Name != "search" {
		t.Errorf("manifest %s", raw)
	}
	if ts.NeedsMigration {
		t.Error("needsMigration is true without a Migrator")
	}
	if got := string(ts.Tools[1].InputSchema); got != `{"type":"object","additionalProperties":false}` {
		t.Errorf("struct{} tool schema %s, want exactly the RAP TS-8 form", got)
	}
	var schema struct {
		Properties map[string]struct {
			Type, Description string
		}
		Required []string
	}
	if err := json.Unmarshal(ts.Tools[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Properties["query"].Type != "string" || schema.Properties["query"].Description != "what to look for" ||
		schema.Properties["limit"].Type != "integer" || len(schema.Required) != 1 || schema.Required[0] != "query" {
		t.Errorf("inferred schema %s", ts.Tools[0].InputSchema)
	}
	if ts.Tools[0].Annotations == nil || !ts.Tools[0].Annotations.ReadOnly {
		t.Error("annotations lost")
	}
	// Behind a TLS-terminating proxy.
	if ts, _ := get(hs.URL+rap.WellKnownPath, "X-Forwarded-Proto", "https"); !strings.HasPrefix(ts.Endpoint, "https://") {
		t.Errorf("endpoint %q behind X-Forwarded-Proto: https, want https", ts.Endpoint)
	}
	// Mounted under a prefix.
	mux := http.NewServeMux()
	s2 := rap.NewServer("prefixed", &rap.ServerOptions{Logger: sdkQuiet()})
	setup(s2)
	mux.Handle("/tools/", http.StripPrefix("/tools", s2))
	hs2 := httptest.NewServer(mux)
	defer hs2.Close()
	if ts, _ := get(hs2.URL + "/tools" + rap.WellKnownPath); ts.Endpoint != hs2.URL+"/tools" {
		t.Errorf("endpoint %q when mounted under /tools, want %q", ts.Endpoint, hs2.URL+"/tools")
	}
	// An explicit endpoint wins.
	_, hs3 := newSDKServer(t, &rap.ServerOptions{Endpoint: "https://tools.example.com/rap"}, setup)
	if ts, _ := get(hs3.URL + rap.WellKnownPath); ts.Endpoint != "https://tools.example.com/rap" {
		t.Errorf("endpoint %q, want the configured one", ts.Endpoint)
	}
}

// RAP MI-1: needsMigration is true iff a Migrator is set, and /migrate
// answers 200 only once the migrator returned nil, else 500 with its
// message.
func TestMigrate(t *testing.T) {
	entered := make(chan *rap.MigrateRequest, 1)
	release := make(chan error)
	_, hs := newSDKServer(t, &rap.ServerOptions{
		Migrator: func(ctx context.Context, req *rap.MigrateRequest) error {
			entered <- req
			return <-release
		},
	}, addEcho)
	resp, err := http.Get(hs.URL + rap.WellKnownPath)
	if err != nil {
		t.Fatal(err)
	}
	var ts rap.Toolset
	_ = json.NewDecoder(resp.Body).Decode(&ts)
	resp.Body.Close()
	if !ts.NeedsMigration {
		t.Error("needsMigration is false with a Migrator")
	}
	body := []byte(`{"session_id":"root_1","destination_url":"http://127.0.0.1:9/"}`)
	type answer struct {
		status int
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		status, msg, _ := sdkPost(t, hs.URL+"/migrate", body)
		answered <- answer{status, msg}
	}()
	req := <-entered
	if req.SessionID != "root_1" || req.DestinationURL != "http://127.0.0.1:9/" {
		t.Errorf("migrator got %+v", req)
	}
	select {
	case a := <-answered:
		t.Fatalf("/migrate answered %d before the migrator returned", a.status)
	case <-time.After(100 * time.Millisecond):
	}
	release <- nil
	if a := <-answered; a.status != 200 {
		t.Errorf("/migrate answered %d %q after success, want 200", a.status, a.body)
	}
	go func() {
		status, msg, _ := sdkPost(t, hs.URL+"/migrate", body)
		answered <- answer{status, msg}
	}()
	<-entered
	release <- errors.New("destination unreachable")
	if a := <-answered; a.status != 500 || !strings.Contains(a.body, "destination unreachable") {
		t.Errorf("/migrate answered %d %q after failure, want 500 with the message", a.status, a.body)
	}
	for _, bad := range []string{`{}`, `{"session_id":"s"}`, `{"session_id":"s","destination_url":"nope"}`} {
		if status, msg, _ := sdkPost(t, hs.URL+"/migrate", []byte(bad)); status != 400 {
			t.Errorf("/migrate %s answered %d %q, want 400", bad, status, msg)
		}
	}
	// Without a Migrator: 404.
	_, hs2 := newSDKServer(t, nil, addEcho)
	if status, msg, _ := sdkPost(t, hs2.URL+"/migrate", body); status != 404 || !strings.Contains(msg, "needsMigration") {
		t.Errorf("/migrate without a Migrator answered %d %q, want 404", status, msg)
	}
}

// Shutdown cancels handlers with ErrServerShutdown, waits for their
// results, and then refuses new invocations.
func TestShutdownCancelsAndRefuses(t *testing.T) {
	sink := newSDKSink(t)
	cause := make(chan error, 1)
	inHandler := make(chan struct{})
	s, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "wait", Description: "Waits."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				close(inHandler)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return nil, ctx.Err()
			})
	})
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("wait", "s1", "t", sink.URL(), nil)); status != 200 {
		t.Fatal("invocation refused")
	}
	<-inHandler
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if c := <-cause; !errors.Is(c, rap.ErrServerShutdown) {
		t.Errorf("cause %v, want rap.ErrServerShutdown", c)
	}
	// The result was delivered before Shutdown returned.
	if got := sink.forID("s1"); len(got) != 1 || !strings.Contains(got[0].(*rap.ToolResult).Text, "shut down") {
		t.Errorf("after Shutdown the callbacks are %s, want one Error result about the shutdown", sdkDescribe(got))
	}
	status, body, hdr := sdkPost(t, hs.URL, sdkInvocation("wait", "s2", "t", sink.URL(), nil))
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(body, "shutting down") {
		t.Errorf("invocation after Shutdown answered %d %q, want 503 with Retry-After", status, body)
	}
}

// A server that was not started refuses invocations with a message that
// says what to do; discovery works regardless.
func TestNotStartedAndRouting(t *testing.T) {
	s := rap.NewServer("unstarted", &rap.ServerOptions{Logger: sdkQuiet()})
	addEcho(s)
	hs := httptest.NewServer(s)
	defer hs.Close()
	sink := newSDKSink(t)
	if status, body, _ := sdkPost(t, hs.URL, sdkInvocation("echo", "n", "t", sink.URL(), map[string]any{"text": "x"})); status != 503 || !strings.Contains(body, "Start") {
		t.Errorf("unstarted server answered %d %q, want 503 naming Start", status, body)
	}
	resp, err := http.Get(hs.URL + rap.WellKnownPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("discovery on an unstarted server answered %d", resp.StatusCode)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/", 405}, {"GET", "/close_thread", 405}, {"POST", rap.WellKnownPath, 405}, {"POST", "/nope", 404},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s answered %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Error("a second Start succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// RAP TR-1, TR-5, RE-1, SU-4: the strict fake runtime from raptest
// accepts everything the SDK sends (JSON POSTs with the right
// Content-Type, group_id, id and call_id echoed, one result, nothing after
// a final event) across a result and a subscription.
func TestAgainstFakeRuntime(t *testing.T) {
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		addEcho(s)
		rap.AddSubscription(s, &rap.Tool{Name: "ticks", Description: "Three ticks."},
			func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
				for i := range 3 {
					if err := sub.Emit(ctx, fmt.Sprintf(`{"tick":%d}`, i)); err != nil {
						return err
					}
				}
				return nil
			})
	})
	rt := raptest.NewRuntime(raptest.WithLogger(sdkQuiet()))
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	call, err := rt.Invoke(ctx, hs.URL, "echo", map[string]string{"text": "hello"}, raptest.WithCallID("m1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil || res.Text != "hello" {
		t.Fatalf("result %+v, %v", res, err)
	}
	sub, err := rt.Invoke(ctx, hs.URL, "ticks", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sub.Result(ctx); err != nil || !res.Subscription {
		t.Fatalf("subscription result %+v, %v", res, err)
	}
	evs, err := sub.Events(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if evs[2].Text != `{"tick":2}` || !evs[3].Final {
		t.Errorf("events %+v; want three ticks then a final event", evs)
	}
	if errs := rt.Errors(); len(errs) > 0 {
		t.Errorf("the fake runtime saw protocol violations: %v", errs)
	}
}

// Serve starts the server on a listener and shuts it down cleanly when its
// context ends.
func TestServe(t *testing.T) {
	sink := newSDKSink(t)
	s := rap.NewServer("served", &rap.ServerOptions{Logger: sdkQuiet(), Retry: sdkFastRetry})
	addEcho(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	if status, body, _ := sdkPost(t, base, sdkInvocation("echo", "sv1", "t", sink.URL(), map[string]any{"text": "served"})); status != 200 {
		t.Fatalf("answered %d %q", status, body)
	}
	if res := sink.result("sv1"); res.Text != "served" {
		t.Errorf("result %q", res.Text)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after its context ended, want nil", err)
		}
	case <-time.After(sdkWait):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get(base + rap.WellKnownPath); err == nil {
		t.Error("the listener still accepts connections after Serve returned")
	}
}

// Logs never carry the callback URL's token, the bearer token, the
// OAuth URL or the arguments, even when deliveries fail.
func TestLogsHoldNoSecrets(t *testing.T) {
	var logs sdkLockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unknown thread", http.StatusNotFound)
	}))
	defer refusing.Close()
	s, hs := newSDKServer(t, &rap.ServerOptions{Logger: logger, BearerToken: "bearer-SECRET"}, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "leaky", Description: "d"},
			func(ctx context.Context, c *rap.Call, in echoIn) (*rap.Reply, error) {
				_ = c.RequestOAuth(ctx, "https://auth.example.com/authorize?code=oauth-SECRET")
				return nil, errors.New("failed")
			})
	})
	// The token sits in the query and userinfo, which rap.RedactURL strips
	// from the sender's logs. (A token in the path is not redacted by the
	// sender; see the report.)
	cb := strings.Replace(refusing.URL, "http://", "http://user:pass-SECRET@", 1) + "/cb?sig=query-SECRET"
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("leaky", "l1", "t", cb, map[string]any{"text": "args-SECRET"}), "Authorization", "Bearer bearer-SECRET"); status != 200 {
		t.Fatal("refused")
	}
	sdkPost(t, hs.URL+"/close_thread", []byte(`{"thread_id":"t"}`), "Authorization", "Bearer bearer-SECRET")
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "l1") {
		t.Fatalf("expected the call to be logged; log:\n%s", out)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("a secret reached the logs:\n%s", out)
	}
}

// sdkNoNetwork refuses every callback, so fuzzed callback URLs never
// reach a real host.
type sdkNoNetwork struct{}

func (sdkNoNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("callbacks are disabled in this test")
}

// FuzzInvoke feeds arbitrary bodies to the invocation endpoint. The server
// never panics and answers only 200, 400, 413 or 503; it answers 200 only
// to a JSON object with an http(s) callback_url and non-empty string
// group_id and id (everything else is refused with a message), so nothing
// it accepts lacks a place to send its result (RAP IN-3, IN-4).
func FuzzInvoke(f *testing.F) {
	for _, seed := range []string{
		`{"operation":"echo","arguments":{"text":"x"},"id":"a","group_id":"g","callback_url":"http://127.0.0.1:1/cb"}`,
		`{"operation":"echo","arguments":[],"id":"a","group_id":"g","callback_url":"https://h/cb","call_id":null}`,
		`{"operation":7,"id":"a","group_id":"g","callback_url":"http://h"}`,
		`{"id":"a","group_id":"g","callback_url":"ftp://h"}`,
		`{"id":"","group_id":"g","callback_url":"http://h"}`,
		`[]`, `null`, `{`, ``, `{"callback_url":"http://h","group_id":"g","id":"i","thread_ancestors":[1]}`,
	} {
		f.Add([]byte(seed))
	}
	s := rap.NewServer("fuzz", &rap.ServerOptions{
		Logger:     sdkQuiet(),
		HTTPClient: &http.Client{Transport: sdkNoNetwork{}},
		Retry:      rap.RetryPolicy{Initial: time.Millisecond, Max: time.Millisecond, GiveUpAfter: time.Millisecond},
		Queue:      1 << 16,
	})
	addEcho(s)
	if err := s.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("accepted a body that is not a JSON object: %q", body)
			}
			cb, _ := m["callback_url"].(string)
			g, _ := m["group_id"].(string)
			id, _ := m["id"].(string)
			u, err := url.Parse(cb)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || g == "" || id == "" {
				t.Fatalf("accepted %q without a usable callback_url, group_id and id", body)
			}
		case http.StatusBadRequest:
			if !strings.HasPrefix(rec.Body.String(), "invalid invocation: ") {
				t.Fatalf("400 body %q does not say what was wrong", rec.Body.String())
			}
		case http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable:
		default:
			t.Fatalf("answered %d to %q", rec.Code, body)
		}
	})
}

// RAP TR-7: ServerOptions.CallbackHeader rides on every callback, so a
// runtime can authenticate them.
func TestCallbackHeader(t *testing.T) {
	got := make(chan string, 4)
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization") + "|" + r.Header.Get("Content-Type")
	}))
	defer rt.Close()
	_, hs := newSDKServer(t, &rap.ServerOptions{CallbackHeader: http.Header{"Authorization": {"Bearer runtime-token"}}, CallbackOrigins: []string{rt.URL}}, addEcho)
	sdkPost(t, hs.URL, sdkInvocation("echo", "h1", "t", rt.URL, map[string]any{"text": "x"}))
	select {
	case h := <-got:
		if h != "Bearer runtime-token|application/json" {
			t.Errorf("callback headers %q, want the configured Authorization and application/json", h)
		}
	case <-time.After(sdkWait):
		t.Fatal("no callback arrived")
	}
}
