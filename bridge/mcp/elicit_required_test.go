package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/rap"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP server that answers tools/call with error
// -32042 (URL elicitation required) gets its link shown to the user as a
// RAP oauth message (OA-1); the call stays pending until the server
// sends notifications/elicitation/complete, then the bridge calls the
// tool again and its result is the call's one result.
func TestURLElicitationRequiredError(t *testing.T) {
	var mu sync.Mutex
	var session *sdk.ServerSession
	var calls atomic.Int32
	var connected atomic.Bool
	s := sdk.NewServer(&sdk.Implementation{Name: "linker", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "fetch_mail", Description: "Needs the user's mailbox connected."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			calls.Add(1)
			if !connected.Load() {
				mu.Lock()
				session = req.Session
				mu.Unlock()
				return nil, nil, sdk.URLElicitationRequiredError([]*sdk.ElicitParams{{
					Mode: "url", ElicitationID: "el-1", URL: "https://mail.example.com/connect?s=1", Message: "Connect your mailbox",
				}})
			}
			return textResult("3 new messages"), nil, nil
		})
	mcpHTTP := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(mcpHTTP.Close)
	f := startBridge(t, &Options{Name: "mail", URL: mcpHTTP.URL, Logger: quietLogger()})
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "fetch_mail", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var link string
	waitFor(t, "the oauth message", func() bool {
		for _, m := range c.Messages() {
			if o, ok := m.(*rap.OAuth); ok {
				link = o.AuthURL
				return true
			}
		}
		return false
	})
	if link != "https://mail.example.com/connect?s=1" {
		t.Fatalf("oauth link = %q", link)
	}
	for _, m := range c.Messages() {
		if _, ok := m.(*rap.ToolResult); ok {
			t.Fatal("the call ended before the server reported the step complete")
		}
	}
	// The user finishes; the server says so.
	connected.Store(true)
	mu.Lock()
	ss := session
	mu.Unlock()
	if err := ss.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: "el-1"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "3 new messages" || calls.Load() != 2 {
		t.Errorf("result = %q after %d calls, want the retried call's result", res.Text, calls.Load())
	}
}

// A -32042 error whose link has no elicitationId cannot
// be waited for: the link is shown and the result says to call again.
func TestURLElicitationRequiredWithoutID(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "linker", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "fetch_mail", Description: "Needs a link opened."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return nil, nil, sdk.URLElicitationRequiredError([]*sdk.ElicitParams{{Mode: "url", URL: "https://mail.example.com/connect", Message: "Connect"}})
		})
	mcpHTTP := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(mcpHTTP.Close)
	f := startBridge(t, &Options{Name: "mail", URL: mcpHTTP.URL, Logger: quietLogger()})
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "fetch_mail", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Error: the MCP server \"mail\" needs the user to open a link") || !hasOAuth(c) {
		t.Errorf("result = %q (oauth message: %v)", res.Text, hasOAuth(c))
	}
}
