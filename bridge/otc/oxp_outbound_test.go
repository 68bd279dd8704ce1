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
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// oxpRAPServer is a tool server built with the rap SDK that also answers
// the OXP routes (ServerOptions.OXP); every OXP answer is validated against
// openapi-1.0.json.
func oxpRAPServer(t *testing.T) string {
	s := rap.NewServer("demo-tools", &rap.ServerOptions{OXP: true})
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
