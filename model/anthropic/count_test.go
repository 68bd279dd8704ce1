package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
)

// CountTokens asks the Messages API's count_tokens endpoint about the
// request as Complete would send it (model, system prompt, tools and
// messages, no max_tokens) and returns its input_tokens; an error answer
// is an error that never carries the API key.
func TestCountTokens(t *testing.T) {
	var body map[string]json.RawMessage
	var path string
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		w.Header().Set("Content-Type", "application/json")
		if fail {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad key sk-secret-key"}}`)
			return
		}
		io.WriteString(w, `{"input_tokens":1234}`)
	}))
	defer srv.Close()
	p, err := New(&Options{APIKey: "sk-secret-key", BaseURL: srv.URL, Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{System: "Be brief.", Messages: []model.Message{{Role: model.RoleUser, Text: "hello"}},
		Tools: []model.ToolSpec{{Name: "get_time", Description: "The time.", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	n, err := p.CountTokens(context.Background(), req)
	if err != nil || n != 1234 {
		t.Fatalf("CountTokens = %d, %v; want 1234", n, err)
	}
	if path != "/v1/messages/count_tokens" {
		t.Fatalf("asked %s", path)
	}
	for _, k := range []string{"model", "system", "tools", "messages"} {
		if _, ok := body[k]; !ok {
			t.Errorf("the count request has no %q: %v", k, body)
		}
	}
	if _, ok := body["max_tokens"]; ok {
		t.Error("the count request carries max_tokens, which the endpoint does not take")
	}
	fail = true
	if _, err := p.CountTokens(context.Background(), req); err == nil || strings.Contains(err.Error(), "sk-secret-key") {
		t.Fatalf("error answer: %v; want an error without the key", err)
	}
}
