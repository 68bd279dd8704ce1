package raptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// fakeTool is a hand-written RAP tool server, so that these tests exercise
// the fake runtime against exactly the messages they choose, including
// wrong ones. script runs after the 200 acknowledgement.
type fakeTool struct {
	t      *testing.T
	srv    *httptest.Server
	script func(inv *rap.Invocation, post func(body any) int)

	mu       sync.Mutex
	invs     []*rap.Invocation
	requests []recorded // every non-discovery request
	ackCode  int
	wg       sync.WaitGroup
}

type recorded struct {
	path, auth, contentType string
	body                    []byte
}

func newFakeTool(t *testing.T, script func(inv *rap.Invocation, post func(body any) int)) *fakeTool {
	t.Helper()
	ft := &fakeTool{t: t, script: script, ackCode: http.StatusOK}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+rap.WellKnownPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rap.Toolset{
			Name:     "fake",
			Endpoint: ft.srv.URL + "/invoke",
			Tools: []rap.Tool{
				{Name: "echo", Description: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`)},
				{Name: "watch", Description: "watch", InputSchema: rap.EmptyObjectSchema},
			},
		})
	})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ft.mu.Lock()
		ft.requests = append(ft.requests, recorded{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		code := ft.ackCode
		ft.mu.Unlock()
		if r.URL.Path != "/invoke" {
			return
		}
		inv, err := rap.DecodeInvocation(body)
		if err != nil {
			t.Errorf("fake tool got an invalid invocation: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		ft.mu.Lock()
		ft.invs = append(ft.invs, inv)
		ft.mu.Unlock()
		if code != http.StatusOK {
			http.Error(w, "fake tool refuses", code)
			return
		}
		w.WriteHeader(http.StatusOK)
		if ft.script != nil {
			ft.wg.Add(1)
			go func() {
				defer ft.wg.Done()
				ft.script(inv, func(b any) int { return postJSON(t, inv.CallbackURL, "application/json", b) })
			}()
		}
	})
	ft.srv = httptest.NewServer(mux)
	t.Cleanup(func() { ft.wg.Wait(); ft.srv.Close() })
	return ft
}

func (ft *fakeTool) lastInvocation() *rap.Invocation {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if len(ft.invs) == 0 {
		return nil
	}
	return ft.invs[len(ft.invs)-1]
}

func (ft *fakeTool) requestsTo(path string) []recorded {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []recorded
	for _, r := range ft.requests {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// postJSON POSTs b (marshalled unless it is []byte) and returns the status.
func postJSON(t *testing.T, url, contentType string, b any) int {
	data, ok := b.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(b); err != nil {
			t.Errorf("marshal: %v", err)
			return 0
		}
	}
	resp, err := http.Post(url, contentType, bytes.NewReader(data))
	if err != nil {
		t.Errorf("POST callback: %v", err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func result(inv *rap.Invocation, text string) rap.ToolResult {
	return rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, CallID: inv.CallID, Text: text}
}

func TestInvokeAndResult(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		post(result(inv, "hello"))
	})
	rt := NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "echo", map[string]any{"x": 1},
		WithCallID("c-1"), WithAncestors("root", "parent"), WithUserID("u-7"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hello" || res.ID != call.Invocation.ID || res.CallID != "c-1" {
		t.Errorf("result = %+v", res)
	}
	// RAP IN-1: what the tool received is a complete invocation.
	inv := ft.lastInvocation()
	if inv.Operation != "echo" || string(inv.Arguments) != `{"x":1}` || inv.GroupID != rt.ThreadID() ||
		inv.CallID != "c-1" || inv.UserID != "u-7" || strings.Join(inv.ThreadAncestors, ",") != "root,parent" {
		t.Errorf("invocation = %+v", inv)
	}
	if !strings.HasPrefix(inv.CallbackURL, rt.URL()+callbackPrefix) || len(inv.CallbackURL) < len(rt.URL())+len(callbackPrefix)+40 {
		t.Errorf("callback URL %q lacks a long token under %s", inv.CallbackURL, rt.URL())
	}
	// RAP TR-1: the invocation is sent as JSON.
	if got := ft.requestsTo("/invoke")[0].contentType; got != "application/json" {
		t.Errorf("invocation Content-Type = %q", got)
	}
	if rt.Received() != 1 || len(rt.Errors()) != 0 {
		t.Errorf("Received = %d, Errors = %v", rt.Received(), rt.Errors())
	}
}

func TestCallbackURLsAreUniquePerCall(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, nil)
	rt := NewRuntime()
	defer rt.Close()
	seen := map[string]bool{}
	for range 5 {
		c, err := rt.Invoke(ctx, ft.srv.URL, "echo", nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.Invocation.CallbackURL] || seen[c.Invocation.ID] {
			t.Fatalf("callback URL or id repeated: %s", c.Invocation.ID)
		}
		seen[c.Invocation.CallbackURL], seen[c.Invocation.ID] = true, true
	}
}

// A callback whose ids do not match its call is refused (403) and recorded;
// a good message after it is still accepted (RAP TR-5, RE-1, RE-5).
func TestCallbackIDChecks(t *testing.T) {
	tests := []struct {
		name   string
		msg    func(inv *rap.Invocation) any
		status int
		want   string
	}{
		{"wrong group_id", func(inv *rap.Invocation) any {
			r := result(inv, "x")
			r.GroupID = "other-thread"
			return r
		}, 403, "group_id"},
		{"wrong id", func(inv *rap.Invocation) any {
			r := result(inv, "x")
			r.ID = "call_other"
			return r
		}, 403, "id"},
		{"missing call_id", func(inv *rap.Invocation) any {
			r := result(inv, "x")
			r.CallID = ""
			return r
		}, 400, "call_id"},
		{"wrong call_id", func(inv *rap.Invocation) any {
			r := result(inv, "x")
			r.CallID = "nope"
			return r
		}, 403, "call_id"},
		{"wrong tool_call_id", func(inv *rap.Invocation) any {
			return rap.SubscriptionEvent{GroupID: inv.GroupID, ToolCallID: "call_other", Text: "{}"}
		}, 403, "tool_call_id"},
		{"oauth with wrong id", func(inv *rap.Invocation) any {
			return rap.OAuth{GroupID: inv.GroupID, ID: "x", CallID: inv.CallID, AuthURL: "https://a.example/"}
		}, 403, "id"},
		{"malformed JSON", func(*rap.Invocation) any { return []byte(`{"type":"tool_result",`) }, 400, "malformed"},
		{"unknown type", func(inv *rap.Invocation) any {
			return map[string]any{"type": "telegram", "group_id": inv.GroupID}
		}, 400, "unknown message type"},
		// A result without text is an empty result now; a
		// choice without choices is still refused (RAP UC-1).
		{"user_choice without choices", func(inv *rap.Invocation) any {
			return map[string]any{"type": "user_choice", "group_id": inv.GroupID, "id": inv.ID, "call_id": inv.CallID,
				"prompt": "p", "choices": []string{}, "response_url": "http://127.0.0.1:1/c"}
		}, 400, "choices"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			statuses := make(chan [2]int, 1)
			ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
				bad := post(tc.msg(inv))
				good := post(result(inv, "good"))
				statuses <- [2]int{bad, good}
			})
			rt := NewRuntime()
			defer rt.Close()
			call, err := rt.Invoke(ctx, ft.srv.URL, "echo", nil, WithCallID("cid"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := call.Result(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := <-statuses
			if got[0] != tc.status || got[1] != 200 {
				t.Errorf("statuses = %v, want [%d 200]", got, tc.status)
			}
			if res.Text != "good" || len(call.Messages()) != 1 || rt.Received() != 1 {
				t.Errorf("result %q, %d messages, %d received; want only the good one", res.Text, len(call.Messages()), rt.Received())
			}
			errs := rt.Errors()
			var ce *CallbackError
			if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.Status != tc.status || !strings.Contains(ce.Problem, tc.want) {
				t.Errorf("Errors = %v, want one naming %q", errs, tc.want)
			}
		})
	}
}

// RAP TR-1: callbacks must be sent with Content-Type application/json.
func TestCallbackContentType(t *testing.T) {
	ctx := testContext(t)
	status := make(chan int, 1)
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		b, _ := json.Marshal(result(inv, "x"))
		status <- postJSON(t, inv.CallbackURL, "text/plain", b)
		post(result(inv, "ok"))
	})
	rt := NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if s := <-status; s != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain callback answered %d, want 415", s)
	}
	if errs := rt.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "application/json") {
		t.Errorf("Errors = %v", errs)
	}
}

func TestUnknownCallbackURL(t *testing.T) {
	rt := NewRuntime()
	defer rt.Close()
	s := postJSON(t, rt.URL()+callbackPrefix+"guessed", "application/json", []byte(`{}`))
	if s != http.StatusNotFound {
		t.Errorf("status = %d, want 404", s)
	}
	errs := rt.Errors()
	if len(errs) != 1 || strings.Contains(errs[0].Error(), "guessed") {
		t.Errorf("Errors = %v; want one that does not echo the URL", errs)
	}
	resp, err := http.Get(rt.URL() + callbackPrefix + "x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %d, want 405", resp.StatusCode)
	}
}

func TestCallbackSizeLimit(t *testing.T) {
	ctx := testContext(t)
	status := make(chan int, 1)
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		status <- post(result(inv, strings.Repeat("x", 2000)))
		post(result(inv, "small"))
	})
	rt := NewRuntime(WithMaxCallbackBytes(1000))
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := <-status; s != http.StatusRequestEntityTooLarge || res.Text != "small" {
		t.Errorf("big callback answered %d; result %q", s, res.Text)
	}
}

// RAP TR-6: WithFailures lets a test see a tool retry on 5xx; failed
// deliveries are not counted.
func TestWithFailures(t *testing.T) {
	ctx := testContext(t)
	statuses := make(chan []int, 1)
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		var got []int
		for range 5 {
			s := post(result(inv, "retried"))
			got = append(got, s)
			if s == 200 {
				break
			}
		}
		statuses <- got
	})
	rt := NewRuntime(WithFailures(2, http.StatusServiceUnavailable))
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-statuses; len(got) != 3 || got[0] != 503 || got[1] != 503 || got[2] != 200 {
		t.Errorf("statuses = %v, want [503 503 200]", got)
	}
	if rt.Received() != 1 || len(rt.Errors()) != 0 {
		t.Errorf("Received = %d, Errors = %v", rt.Received(), rt.Errors())
	}
}

// RAP TR-4: a non-200 acknowledgement is an error carrying status and body.
func TestInvokeNon200(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, nil)
	ft.ackCode = http.StatusTooManyRequests
	rt := NewRuntime()
	defer rt.Close()
	_, err := rt.Invoke(ctx, ft.srv.URL, "echo", nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 429 || !strings.Contains(se.Body, "fake tool refuses") {
		t.Fatalf("err = %v, want a StatusError 429 with the body", err)
	}
	rt.mu.Lock()
	n := len(rt.calls)
	rt.mu.Unlock()
	if n != 0 {
		t.Errorf("%d calls still registered after a refused invocation", n)
	}
}

// RAP IN-2: the runtime sends only operations of the toolset, unless a test
// asks for an unchecked call to test RAP IN-3.
func TestInvokeUnknownOperation(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, nil)
	rt := NewRuntime()
	defer rt.Close()
	_, err := rt.Invoke(ctx, ft.srv.URL, "nope", nil)
	if err == nil || !strings.Contains(err.Error(), `no tool "nope"`) || !strings.Contains(err.Error(), "echo, watch") {
		t.Fatalf("err = %v", err)
	}
	if n := len(ft.requestsTo("/invoke")); n != 0 {
		t.Fatalf("sent %d invocations of an unknown operation", n)
	}
	if _, err := rt.Invoke(ctx, ft.srv.URL, "nope", nil, Unchecked()); err != nil {
		t.Fatal(err)
	}
	if inv := ft.lastInvocation(); inv == nil || inv.Operation != "nope" {
		t.Errorf("unchecked invocation not sent: %+v", inv)
	}
}

func TestInvokeArgumentsMustBeObject(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, nil)
	rt := NewRuntime()
	defer rt.Close()
	for _, args := range []any{[]int{1}, "text", json.RawMessage(`[1]`), json.RawMessage(`{bad`)} {
		if _, err := rt.Invoke(ctx, ft.srv.URL, "echo", args); err == nil || !strings.Contains(err.Error(), "JSON object") {
			t.Errorf("args %v: err = %v", args, err)
		}
	}
}

// Next, Result and Events read the same messages through their own cursors;
// order rules are checked (RAP SU-4, SU-5).
func TestCursorsAndOrderRules(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		post(rap.ViewUpdate{GroupID: inv.GroupID, ViewType: "progress", Content: json.RawMessage(`{"pct":1}`)})
		r := result(inv, "subscribed")
		r.Subscription = true
		post(r)
		for i, txt := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
			post(rap.SubscriptionEvent{GroupID: inv.GroupID, ToolCallID: inv.ID, Text: txt, Final: i == 2})
		}
		post(rap.SubscriptionEvent{GroupID: inv.GroupID, ToolCallID: inv.ID, Text: `{"late":true}`})
		post(result(inv, "second"))
	})
	rt := NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil || !res.Subscription || res.Text != "subscribed" {
		t.Fatalf("Result = %+v, %v", res, err)
	}
	evs, err := call.Events(ctx, 2)
	if err != nil || len(evs) != 2 || evs[0].Text != `{"n":1}` || evs[1].Text != `{"n":2}` {
		t.Fatalf("Events(2) = %v, %v", evs, err)
	}
	evs, err = call.Events(ctx, 5)
	if err == nil || len(evs) != 1 || !evs[0].Final {
		t.Fatalf("Events(5) after 2 = %v, %v; want the final event and an error", evs, err)
	}
	first, err := call.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.(*rap.ViewUpdate); !ok {
		t.Errorf("Next = %T, want the view_update that came first", first)
	}
	// Wait for all seven deliveries, then check the two violations.
	deadline := time.Now().Add(15 * time.Second)
	for rt.Received() < 7 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	errs := rt.Errors()
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "after the final") || !strings.Contains(errs[1].Error(), "tool_result number 2") {
		t.Errorf("Errors = %v", errs)
	}
}

// RAP SU-1, SU-3, SU-4: an event is recorded as an error when it comes
// before the confirming tool_result, or after a result that did not say
// subscription: true, since a runtime would discard it.
func TestEventsNeedAConfirmation(t *testing.T) {
	ctx := testContext(t)
	for _, tc := range []struct {
		name         string
		subscription bool
		eventFirst   bool
		want         string
	}{
		{"event before the confirmation", true, true, "before the confirming tool_result"},
		{"event after a plain result", false, false, "did not say subscription: true"},
		{"event after the confirmation", true, false, ""},
	} {
		ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
			r := result(inv, "done")
			r.Subscription = tc.subscription
			ev := rap.SubscriptionEvent{GroupID: inv.GroupID, ToolCallID: inv.ID, Text: `{"n":1}`}
			if tc.eventFirst {
				post(ev)
				post(r)
			} else {
				post(r)
				post(ev)
			}
		})
		rt := NewRuntime()
		call, err := rt.Invoke(ctx, ft.srv.URL, "watch", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := call.Events(ctx, 1); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := call.Result(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		errs := rt.Errors()
		switch {
		case tc.want == "" && len(errs) != 0:
			t.Errorf("%s: Errors = %v, want none", tc.name, errs)
		case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("%s: Errors = %v, want one naming %q", tc.name, errs, tc.want)
		}
		rt.Close()
	}
}

func TestCancelCloseThreadChoose(t *testing.T) {
	ctx := testContext(t)
	choices := make(chan *rap.Invocation, 1)
	var ft *fakeTool
	ft = newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		post(rap.UserChoice{GroupID: inv.GroupID, ID: inv.ID, Prompt: "Go?", Choices: []string{"yes", "no"}, Default: 1,
			ResponseURL: ft.srv.URL + "/choice"})
		choices <- inv
	})
	rt := NewRuntime(WithBearerToken("s3cret"))
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-choices
	msg, err := call.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uc, ok := msg.(*rap.UserChoice)
	if !ok {
		t.Fatalf("Next = %T, want *rap.UserChoice", msg)
	}
	if err := rt.Choose(ctx, uc, 5); err == nil {
		t.Error("Choose accepted an index out of range")
	}
	if err := rt.Choose(ctx, uc, 0); err != nil {
		t.Fatal(err)
	}
	if err := call.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.CloseThread(ctx, ft.srv.URL+"/", "thread-9"); err != nil {
		t.Fatal(err)
	}
	check := func(path, want string) {
		t.Helper()
		reqs := ft.requestsTo(path)
		if len(reqs) != 1 {
			t.Fatalf("%d requests to %s, want 1", len(reqs), path)
		}
		if string(reqs[0].body) != want || reqs[0].contentType != "application/json" {
			t.Errorf("%s body %s (%s), want %s", path, reqs[0].body, reqs[0].contentType, want)
		}
		// RAP CA-3: the same authentication as invocations.
		if reqs[0].auth != "Bearer s3cret" {
			t.Errorf("%s Authorization = %q", path, reqs[0].auth)
		}
	}
	check("/choice", `{"id":"`+call.Invocation.ID+`","selected":0}`)
	check("/cancel_tool_call", `{"thread_id":"`+call.Invocation.GroupID+`","tool_call_id":"`+call.Invocation.ID+`"}`)
	check("/close_thread", `{"thread_id":"thread-9"}`)
	if a := ft.requestsTo("/invoke")[0].auth; a != "Bearer s3cret" {
		t.Errorf("invoke Authorization = %q", a)
	}
}

func TestWaitErrors(t *testing.T) {
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		post(rap.ViewUpdate{GroupID: inv.GroupID, ViewType: "v", Content: json.RawMessage(`{}`)})
	})
	rt := NewRuntime()
	call, err := rt.Invoke(testContext(t), ft.srv.URL, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Next(testContext(t)); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = call.Result(short)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "view_update") {
		t.Errorf("Result on timeout = %v; want DeadlineExceeded naming what arrived", err)
	}
	done := make(chan error, 1)
	go func() { _, err := call.Result(context.Background()); done <- err }()
	rt.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Result after Close = %v, want ErrClosed", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not wake a waiting Result")
	}
}

func TestDiscoverErrors(t *testing.T) {
	ctx := testContext(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	rt := NewRuntime()
	defer rt.Close()
	_, err := rt.Discover(ctx, srv.URL)
	var de *rap.DiscoveryError
	if !errors.As(err, &de) || de.StatusCode != 404 || !strings.Contains(de.URL, rap.WellKnownPath) {
		t.Errorf("err = %v", err)
	}
}

// RAP TS-5: an invalid manifest is reported whole and nothing is invoked.
func TestDiscoverInvalidManifest(t *testing.T) {
	ctx := testContext(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"bad","endpoint":"not a url","tools":[{"name":"has space","description":"d","inputSchema":{"type":"object"}}]}`)
	}))
	defer srv.Close()
	rt := NewRuntime()
	defer rt.Close()
	_, err := rt.Invoke(ctx, srv.URL, "has space", nil)
	var ve *rap.ValidationError
	if !errors.As(err, &ve) || len(ve.Violations) < 2 {
		t.Fatalf("err = %v, want a ValidationError naming the endpoint and the tool name", err)
	}
}

// RAP IN-2: arguments are checked against the input schema before sending.
func TestInvokeValidatesArguments(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, nil)
	rt := NewRuntime()
	defer rt.Close()
	_, err := rt.Invoke(ctx, ft.srv.URL, "echo", map[string]any{"x": "seven"})
	var ae *rap.ArgumentsError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "arguments.x") {
		t.Fatalf("err = %v, want an ArgumentsError naming arguments.x", err)
	}
	if n := len(ft.requestsTo("/invoke")); n != 0 {
		t.Fatalf("sent %d invocations with invalid arguments", n)
	}
	if _, err := rt.Invoke(ctx, ft.srv.URL, "echo", map[string]any{"x": "seven"}, Unchecked()); err != nil {
		t.Fatal(err)
	}
}

// Release forgets what Next returned, except the tool_result: Messages
// shrinks, Result still answers, and Next goes on with the rest.
func TestRelease(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		r := result(inv, "subscribed")
		r.Subscription = true
		post(r)
		for _, txt := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
			post(rap.SubscriptionEvent{GroupID: inv.GroupID, ToolCallID: inv.ID, Text: txt})
		}
	})
	rt := NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the result and two events
		if _, err := call.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	call.Release()
	if n := len(call.Messages()); n < 1 || n > 2 {
		t.Errorf("after Release, %d messages are kept; want the result and at most the unread third event", n)
	}
	if res, err := call.Result(ctx); err != nil || res.Text != "subscribed" {
		t.Errorf("Result after Release = %+v, %v", res, err)
	}
	m, err := call.Next(ctx)
	if ev, ok := m.(*rap.SubscriptionEvent); err != nil || !ok || ev.Text != `{"n":3}` {
		t.Errorf("Next after Release = %+v, %v; want the third event", m, err)
	}
	call.Release()
	if n := len(call.Messages()); n != 1 {
		t.Errorf("after reading everything and Release, %d messages are kept; want the result only", n)
	}
}
