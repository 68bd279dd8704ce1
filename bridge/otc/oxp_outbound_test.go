package otc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// oxpRAPServer is a tool server built with the rap SDK that also answers
// the OXP routes (ServeOXP); every OXP answer is validated against
// openapi-1.0.json.
func oxpRAPServer(t *testing.T) string {
	s := rap.NewServer("demo-tools", nil)
	ServeOXP(s)
	type greetArgs struct {
		Who string `json:"who"`
	}
	rap.AddTool(s, &rap.Tool{Name: "greet", Description: "Greets."}, func(ctx context.Context, c *rap.Call, in greetArgs) (*rap.Reply, error) {
		return rap.Text("hello " + in.Who), nil
	})
	rap.AddTool(s, &rap.Tool{Name: "fail-now", Description: "Fails."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		return nil, errors.New("the disk is full; free space and try again")
	})
	rap.AddTool(s, &rap.Tool{Name: "pic", Description: "An image."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		return &rap.Reply{Content: []rap.ContentItem{rap.TextContent("a dot"), rap.ImageContent("iVBORw0KGgo=", "image/png")}}, nil
	})
	rap.AddSubscription(s, &rap.Tool{Name: "ticks", Description: "Ticks."}, func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
		return sub.Final(ctx, `{"n":0}`, false)
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &capture{ResponseWriter: w, status: 200}
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		s.ServeHTTP(c, r)
		switch {
		case r.URL.Path == "/tools":
			oxpValidate(t, "tools 200", c.buf.Bytes())
			var list struct{ Items []json.RawMessage }
			json.Unmarshal(c.buf.Bytes(), &list)
			for _, it := range list.Items {
				oxpValidate(t, "definition", it)
			}
		case r.URL.Path == "/tools/call":
			oxpValidate(t, "call request", body)
			oxpValidate(t, fmt.Sprintf("call %d", c.status), c.buf.Bytes())
		}
	}))
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return hs.URL
}

func oxpPost(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/tools/call", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// A rap SDK server answers the OXP 1.0 routes: tools
// listed as OXP definitions, calls answered synchronously with values and
// errors, a subscription tool refused with an error that says it needs RAP.
func TestRAPServerAnswersOXP(t *testing.T) {
	url := oxpRAPServer(t)
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	code, out := oxpPost(t, url, `{"request":{"call_id":"c1","tool_id":"demo_tools.greet@1.0.0","input":{"who":"Ada"}}}`)
	res, _ := out["result"].(map[string]any)
	if code != 200 || res["value"] != "hello Ada" || res["call_id"] != "c1" || res["success"] != true {
		t.Fatalf("greet: %d %v", code, out)
	}
	_, out = oxpPost(t, url, `{"request":{"tool_id":"demo_tools.fail_now","input":{}}}`)
	res, _ = out["result"].(map[string]any)
	if e, _ := res["error"].(map[string]any); res["success"] != false || !strings.Contains(fmt.Sprint(e["message"]), "the disk is full") {
		t.Fatalf("fail: %v", out)
	}
	_, out = oxpPost(t, url, `{"request":{"tool_id":"demo_tools.ticks"}}`)
	res, _ = out["result"].(map[string]any)
	if e, _ := res["error"].(map[string]any); res["success"] != false || !strings.Contains(fmt.Sprint(e["message"]), "through a RAP runtime") {
		t.Fatalf("subscription: %v", out)
	}
	code, out = oxpPost(t, url, `{"request":{"tool_id":"demo_tools.greet","input":{"who":7}}}`)
	if code != 422 || !strings.Contains(fmt.Sprint(out["message"]), "invalid input") {
		t.Fatalf("invalid input: %d %v", code, out)
	}
	code, _ = oxpPost(t, url, `{"request":{"tool_id":"demo_tools.nope"}}`)
	if code != 400 {
		t.Fatalf("unknown tool: %d", code)
	}
	_, out = oxpPost(t, url, `{"request":{"tool_id":"demo_tools.pic"}}`)
	res, _ = out["result"].(map[string]any)
	if v, _ := res["value"].(map[string]any); v == nil || v["content"] == nil {
		t.Fatalf("image: %v", out)
	}
}

// The OTC bridge detects the rap server's
// OXP routes and serves its tools back over RAP.
func TestBridgeOverRAPServerOXP(t *testing.T) {
	url := oxpRAPServer(t)
	tb := startBridge(t, Options{Client: &Client{BaseURL: url}})
	if tb.b.Dialect() != DialectOXP {
		t.Fatalf("dialect %q", tb.b.Dialect())
	}
	res, _ := tb.result(t, "demo_tools_greet", map[string]string{"who": "Bob"})
	if res.ModelText() != "hello Bob" {
		t.Fatalf("result %q", res.ModelText())
	}
	res, _ = tb.result(t, "demo_tools_fail_now", nil)
	if !strings.HasPrefix(res.ModelText(), "Error: ") || !strings.Contains(res.ModelText(), "the disk is full") {
		t.Fatalf("error result %q", res.ModelText())
	}
}

// OXP calls run on the server's workers and are recorded in its call
// journal while they run, like RAP invocations: a full pool answers 503.
// A request repeating a running call's call_id (OXP's idempotency key)
// gets that call's answer without running the tool again, and the call
// goes on when its first client goes away.
func TestOXPCallsUseWorkerPoolAndJournal(t *testing.T) {
	st := openStore(t)
	release := make(chan struct{})
	var runs sync.Map // call id → *atomic.Int32
	s := rap.NewServer("pool", &rap.ServerOptions{Store: st, Workers: 1, Queue: 1})
	rap.AddTool(s, &rap.Tool{Name: "hold", Description: "Holds."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		n, _ := runs.LoadOrStore(c.Invocation.ID, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		<-release
		return rap.Text("held " + c.Invocation.ID), nil
	})
	o := serveOXP(s)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	code, _ := oxpPost(t, hs.URL, `{"request":{"call_id":"c0","tool_id":"pool.hold"}}`)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("a call before Start: %d, want 503", code)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	type answer struct {
		code int
		out  map[string]any
	}
	answers := make(chan answer, 3)
	post := func(callID string) {
		go func() {
			code, out := oxpPost(t, hs.URL, `{"request":{"call_id":"`+callID+`","tool_id":"pool.hold@1.0.0"}}`)
			answers <- answer{code, out}
		}()
	}
	// The first client of c1 goes away once the second has joined.
	gone, leave := context.WithCancel(context.Background())
	defer leave()
	go func() {
		req, _ := http.NewRequestWithContext(gone, http.MethodPost, hs.URL+"/tools/call", strings.NewReader(`{"request":{"call_id":"c1","tool_id":"pool.hold"}}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Error("the first c1 request got an answer after its client went away")
		}
	}()
	journaled := func(ids ...string) bool {
		calls, err := st.UnfinishedCalls(context.Background())
		if err != nil || len(calls) != len(ids) {
			return false
		}
		for i, c := range calls {
			if c.ID != ids[i] || c.CallbackURL != "" {
				return false
			}
		}
		return true
	}
	waitUntil(t, "c1 in the journal", func() bool { return journaled("c1") })
	post("c1") // the same call again: waits for the first's answer
	waitUntil(t, "the second c1 to join the first", func() bool { o.mu.Lock(); defer o.mu.Unlock(); return o.joined == 1 })
	leave()    // c1 goes on
	post("c2") // the queue slot
	waitUntil(t, "c2 in the journal", func() bool { return journaled("c1", "c2") })
	code, out := oxpPost(t, hs.URL, `{"request":{"call_id":"c3","tool_id":"pool.hold"}}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(out["message"]), "busy") {
		t.Fatalf("a call with the worker and the queue taken: %d %v, want 503 busy", code, out)
	}
	close(release)
	got := map[string]int{}
	for range 2 {
		a := <-answers
		res, _ := a.out["result"].(map[string]any)
		if a.code != 200 || res["value"] != "held "+fmt.Sprint(res["call_id"]) {
			t.Fatalf("answer %d %v", a.code, a.out)
		}
		got[fmt.Sprint(res["call_id"])]++
	}
	if got["c1"] != 1 || got["c2"] != 1 {
		t.Errorf("answers by call_id %v, want c1 (to the request that stayed) and c2", got)
	}
	if n, _ := runs.Load("c1"); n.(*atomic.Int32).Load() != 1 {
		t.Errorf("c1 ran %d times, want once", n.(*atomic.Int32).Load())
	}
	if !journaled() {
		t.Error("calls left in the journal after their answers")
	}
}

// The OXP routes need the server's bearer token, except /health.
func TestOXPRoutesNeedTheBearerToken(t *testing.T) {
	s := rap.NewServer("auth", &rap.ServerOptions{BearerToken: "s3cret"})
	rap.AddTool(s, &rap.Tool{Name: "t", Description: "T."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		return rap.Text("t"), nil
	})
	ServeOXP(s)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	get := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/health", ""); code != 200 {
		t.Errorf("/health without a token: %d, want 200", code)
	}
	if code := get("/tools", ""); code != 401 {
		t.Errorf("/tools without a token: %d, want 401", code)
	}
	if code := get("/tools", "wrong"); code != 401 {
		t.Errorf("/tools with a wrong token: %d, want 401", code)
	}
	if code := get("/tools", "s3cret"); code != 200 {
		t.Errorf("/tools with the token: %d, want 200", code)
	}
	if code, _ := oxpPost(t, hs.URL, `{"request":{"tool_id":"auth.t"}}`); code != 401 {
		t.Errorf("/tools/call without a token: %d, want 401", code)
	}
}
