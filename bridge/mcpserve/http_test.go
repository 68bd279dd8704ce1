package mcpserve

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`

// postInitialize POSTs an MCP initialize request with the given headers
// and returns the status and body.
func postInitialize(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// Over Streamable HTTP with a token: a request without the bearer token
// is refused with 401, one from another site's page (Origin) with 403
// even with the token, and an MCP client with the token lists and calls
// tools.
func TestHTTPGuards(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: "s3cret"}))
	t.Cleanup(hs.Close)

	if status, body := postInitialize(t, hs.URL, nil); status != http.StatusUnauthorized || !strings.Contains(body, "bearer token") {
		t.Errorf("without a token: %d %q, want 401 saying a bearer token is needed", status, body)
	}
	if status, _ := postInitialize(t, hs.URL, map[string]string{"Authorization": "Bearer wrong"}); status != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d, want 401", status)
	}
	status, body := postInitialize(t, hs.URL, map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://evil.example"})
	if status != http.StatusForbidden || !strings.Contains(body, "cross-origin") {
		t.Errorf("from another site's page: %d %q, want 403 cross-origin", status, body)
	}
	if status, body := postInitialize(t, hs.URL, map[string]string{"Authorization": "Bearer s3cret", "Host": "rebound.example"}); status != http.StatusForbidden {
		t.Errorf("with a foreign Host: %d %q, want 403", status, body)
	}
	if status, body := postInitialize(t, hs.URL, map[string]string{"Authorization": "Bearer s3cret"}); status != http.StatusOK {
		t.Errorf("with the token: %d %q, want 200", status, body)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "mcpserve-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: bearer.Client("s3cret", 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over HTTP"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(res); len(got) != 1 || got[0] != "over HTTP" {
		t.Errorf("echo over HTTP: %q", got)
	}
}

// Without a token, the endpoint still refuses other sites' pages, and
// takes programs (no Origin) and the same origin.
func TestHTTPOriginWithoutToken(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{AllowedOrigins: []string{"https://app.example"}}))
	t.Cleanup(hs.Close)
	if status, _ := postInitialize(t, hs.URL, map[string]string{"Origin": "http://evil.example"}); status != http.StatusForbidden {
		t.Errorf("from another site's page: %d, want 403", status)
	}
	if status, _ := postInitialize(t, hs.URL, map[string]string{"Origin": "null"}); status != http.StatusForbidden {
		t.Errorf("from an opaque origin: %d, want 403", status)
	}
	if status, body := postInitialize(t, hs.URL, map[string]string{"Origin": "https://app.example"}); status != http.StatusOK {
		t.Errorf("from an allowed origin: %d %q, want 200", status, body)
	}
	if status, body := postInitialize(t, hs.URL, nil); status != http.StatusOK {
		t.Errorf("from a program: %d %q, want 200", status, body)
	}
}
