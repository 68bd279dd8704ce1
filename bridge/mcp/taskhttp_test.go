package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Over Streamable HTTP, a hostile or buggy server: the
// bridge's own task requests end in a result or an error, never hang.
func TestHTTPTaskConnAnswers(t *testing.T) {
	var mu sync.Mutex
	var answers []string // POSTed responses to server requests
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     string `json:"id"`
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		sse := func(msgs ...string) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, msg := range msgs {
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
			}
		}
		resp := func(result string) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":%s}`, m.ID, result) }
		switch m.Method {
		case "": // a response to a server request
			mu.Lock()
			answers = append(answers, string(body))
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		case "json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, resp(`{"ok":1}`))
		case "sse":
			sse(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
				`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`,
				resp(`{"ok":2}`))
		case "error":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%q,"error":{"code":-32602,"message":"unknown task"}}`, m.ID)
		case "truncated":
			sse(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
		case "big":
			sse(resp(`"` + strings.Repeat("x", 5<<20) + `"`))
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `not json`)
		case "status":
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	h := &httpTaskConn{url: srv.URL, client: srv.Client()}
	ctx := ctxT(t)
	if raw, err := h.call(ctx, "json", nil); err != nil || string(raw) != `{"ok":1}` {
		t.Errorf("json = %s, %v", raw, err)
	}
	if raw, err := h.call(ctx, "sse", nil); err != nil || string(raw) != `{"ok":2}` {
		t.Errorf("sse = %s, %v", raw, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 1 || !strings.Contains(answers[0], `"id":"s1"`) || !strings.Contains(answers[0], "-32601") {
		t.Errorf("the server request on the stream was answered %q, want method not found", answers)
	}
	var we *jsonrpc.Error
	if _, err := h.call(ctx, "error", nil); !errors.As(err, &we) || we.Code != -32602 {
		t.Errorf("error = %v", err)
	}
	for method, want := range map[string]string{
		"truncated": "ended without a response",
		"big":       "over the bridge's limit",
		"garbage":   "not its JSON-RPC response",
		"status":    "HTTP status 500",
	} {
		if _, err := h.call(ctx, method, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want one with %q", method, err, want)
		}
	}
}
