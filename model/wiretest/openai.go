package wiretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorap/gorap/model"
)

// openaiWire speaks the Chat Completions API.
type openaiWire struct{}

func (openaiWire) path() string { return "/v1/chat/completions" }

// breakpoints: the Chat Completions API has no cache markers (its caching
// is automatic).
func (openaiWire) breakpoints([]byte) []Breakpoint { return nil }

// Request shapes of the Chat Completions API, as far as this server checks
// them.
type (
	oaiRequest struct {
		Model               string       `json:"model"`
		Messages            []oaiMessage `json:"messages"`
		Tools               []oaiTool    `json:"tools"`
		Stream              bool         `json:"stream"`
		MaxTokens           int          `json:"max_tokens"`
		MaxCompletionTokens int          `json:"max_completion_tokens"`
	}
	oaiMessage struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []oaiToolCall   `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	oaiPart struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	oaiToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	oaiTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
)

// oaiContent decodes a content member into text and parts. Null is allowed
// where nullOK.
func oaiContent(raw json.RawMessage, where string, nullOK bool) (string, []oaiPart, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		if nullOK {
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("%s.content: expected a string or an array of content parts, got null", where)
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, []oaiPart{{Type: "text", Text: s}}, err
	}
	var parts []oaiPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fmt.Errorf("%s.content: expected a string or an array of content parts: %v", where, err)
	}
	var texts []string
	for j, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return "", nil, fmt.Errorf("%s.content[%d].image_url.url: required", where, j)
			}
		default:
			return "", nil, fmt.Errorf("%s.content[%d].type: unsupported content part type %q", where, j, p.Type)
		}
	}
	return strings.Join(texts, ""), parts, nil
}

func (openaiWire) decode(body []byte, req *Request) error {
	var or oaiRequest
	if err := json.Unmarshal(body, &or); err != nil {
		return fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	req.Model, req.Stream = or.Model, or.Stream
	req.MaxTokens = max(or.MaxTokens, or.MaxCompletionTokens)
	if or.Model == "" {
		return errors.New("you must provide a model parameter")
	}
	if len(or.Messages) == 0 {
		return errors.New("'messages' must contain at least one message")
	}
	names := map[string]bool{}
	for i, t := range or.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Errorf("tools[%d]: type must be 'function' and function.name is required", i)
		}
		if !validFunctionName(t.Function.Name) {
			return fmt.Errorf("Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
		if names[t.Function.Name] {
			return fmt.Errorf("tools: duplicate function name %q", t.Function.Name)
		}
		names[t.Function.Name] = true
		req.Tools = append(req.Tools, model.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}

	var open []string // tool calls of the last assistant message not yet answered
	for i, m := range or.Messages {
		where := fmt.Sprintf("messages[%d]", i)
		if m.Role != "tool" && len(open) > 0 {
			return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(open, ", "))
		}
		switch m.Role {
		case "system", "developer":
			text, parts, err := oaiContent(m.Content, where, false)
			if err != nil {
				return err
			}
			for _, p := range parts {
				if p.Type != "text" {
					return fmt.Errorf("%s.content: a %s message takes text only", where, m.Role)
				}
			}
			req.System = joinLines(req.System, text)
		case "user":
			text, _, err := oaiContent(m.Content, where, false)
			if err != nil {
				return err
			}
			req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Text: text})
		case "assistant":
			text, parts, err := oaiContent(m.Content, where, len(m.ToolCalls) > 0)
			if err != nil {
				return err
			}
			for _, p := range parts {
				if p.Type != "text" {
					return fmt.Errorf("%s.content: an assistant message takes text only", where)
				}
			}
			msg := model.Message{Role: model.RoleAssistant, Text: text}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Type != "function" || c.Function.Name == "" {
					return fmt.Errorf("%s.tool_calls[%d]: id, type 'function' and function.name are required", where, j)
				}
				if !validFunctionName(c.Function.Name) {
					return fmt.Errorf("Invalid '%s.tool_calls[%d].function.name': string does not match pattern '^[a-zA-Z0-9_-]{1,64}$'", where, j)
				}
				if !json.Valid([]byte(c.Function.Arguments)) {
					return fmt.Errorf("%s.tool_calls[%d].function.arguments: not valid JSON", where, j)
				}
				msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments)})
				open = append(open, c.ID)
			}
			req.Messages = append(req.Messages, msg)
		case "tool":
			if !slices.Contains(open, m.ToolCallID) {
				return fmt.Errorf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (%s.tool_call_id %q)", where, m.ToolCallID)
			}
			open = remove(open, m.ToolCallID)
			text, parts, err := oaiContent(m.Content, where, false)
			if err != nil {
				return err
			}
			for j, p := range parts {
				if p.Type != "text" {
					return fmt.Errorf("%s.content[%d]: tool messages take text content parts only, not %q", where, j, p.Type)
				}
			}
			r := model.ToolResult{CallID: m.ToolCallID, Text: text}
			if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleUser && len(req.Messages[n-1].ToolResults) > 0 {
				req.Messages[n-1].ToolResults = append(req.Messages[n-1].ToolResults, r)
			} else {
				req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{r}})
			}
		default:
			return fmt.Errorf("%s.role: invalid role %q", where, m.Role)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(open, ", "))
	}
	return nil
}

func (openaiWire) authorize(h http.Header, key string) string {
	got, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth."
	}
	if got != key {
		return "Incorrect API key provided. You can find your API key in your account settings."
	}
	return ""
}

func (openaiWire) writeError(w http.ResponseWriter, status int, msg string) {
	typ, code := "server_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		typ, code = "invalid_request_error", "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "rate_limit_exceeded", "rate_limit_exceeded"
	case status < 500:
		typ = "invalid_request_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

func (openaiWire) writeReply(w http.ResponseWriter, r *http.Request, req Request, rep Reply, seq int, stop <-chan struct{}) {
	calls := fillIDs(rep.ToolCalls, "call_wt", seq)
	finish := rep.stopReason("stop", "tool_calls")
	id := fmt.Sprintf("chatcmpl-wt%d", seq)
	created := time.Now().Unix()
	usage := map[string]any{"prompt_tokens": len(req.Body) / 4, "completion_tokens": max(1, len(rep.Text)/4),
		"prompt_tokens_details": map[string]any{"cached_tokens": req.CacheReadBytes / 4}}
	usage["total_tokens"] = usage["prompt_tokens"].(int) + usage["completion_tokens"].(int)

	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		if rep.Text != "" {
			msg["content"] = rep.Text
		}
		if len(calls) > 0 {
			var tcs []map[string]any
			for _, c := range calls {
				tcs = append(tcs, map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)}})
			}
			msg["tool_calls"] = tcs
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}

	s := newSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"system_fingerprint": nil,
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
	}
	s.send("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
	for _, piece := range chunks(rep.Text, rep.ChunkSize) {
		s.send("", chunk(map[string]any{"content": piece}, nil))
	}
	if rep.Hang {
		hang(r, stop)
		return
	}
	if rep.StreamError != "" {
		s.send("", map[string]any{"error": map[string]any{"message": rep.StreamError, "type": "server_error", "param": nil, "code": nil}})
		return
	}
	for i, c := range calls {
		s.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		for _, piece := range chunks(string(c.Arguments), rep.ChunkSize) {
			s.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": piece}}}}, nil))
		}
	}
	s.send("", chunk(map[string]any{}, finish))
	if bytes.Contains(req.Body, []byte(`"include_usage":true`)) {
		s.send("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usage})
	}
	s.send("", "[DONE]")
}

// validFunctionName reports whether the API accepts name.
func validFunctionName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func remove(xs []string, x string) []string {
	for i, y := range xs {
		if y == x {
			return append(xs[:i:i], xs[i+1:]...)
		}
	}
	return xs
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}
