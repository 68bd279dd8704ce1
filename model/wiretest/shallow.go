package wiretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gorap/gorap/model"
)

// Shallow makes the API decode only what a benchmark's script reads: the
// model, the token limit, streaming, and each message's role and tool
// calls (ids and names; not their arguments). Text, images, tool results,
// tools and the system prompt are left in Body, and the conversation is
// not checked as the real API checks it. A benchmark's stand-in for a
// model API shares the machine with the runtime it measures, which the
// real API does not, so it should cost as little as it can (rap
// bench-runtime). It returns a for chaining.
func (a *API) Shallow() *API {
	a.mu.Lock()
	a.shallow = true
	a.mu.Unlock()
	return a
}

// shallowDecode is decode for a Shallow API.
func (a *API) shallowDecode(body []byte, req *Request) error {
	var err error
	switch a.wire.(type) {
	case anthropicWire:
		err = shallowAnthropic(body, req)
	case openaiWire:
		err = shallowOpenAI(body, req)
	default:
		return a.wire.decode(body, req)
	}
	if err == nil && req.Model == "" {
		err = errors.New("model: Field required")
	}
	return err
}

// shallowAnthropic reads a Messages API request's model, limits and tool
// calls.
func shallowAnthropic(body []byte, req *Request) error {
	var ar struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &ar); err != nil {
		return fmt.Errorf("request body is not valid JSON: %v", err)
	}
	req.Model, req.MaxTokens, req.Stream = ar.Model, ar.MaxTokens, ar.Stream
	req.Messages = make([]model.Message, 0, len(ar.Messages))
	for i, m := range ar.Messages {
		msg := model.Message{Role: model.Role(m.Role)}
		if m.Role == "assistant" && bytes.HasPrefix(bytes.TrimSpace(m.Content), []byte("[")) {
			var blocks []struct {
				Type string `json:"type"`
				ID   string `json:"id"`
				Name string `json:"name"`
			}
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				return fmt.Errorf("messages.%d.content: %v", i, err)
			}
			for _, b := range blocks {
				if b.Type == "tool_use" {
					msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name})
				}
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	return nil
}

// shallowOpenAI reads a Chat Completions request's model, limits and tool
// calls.
func shallowOpenAI(body []byte, req *Request) error {
	var or struct {
		Model               string `json:"model"`
		MaxTokens           int    `json:"max_tokens"`
		MaxCompletionTokens int    `json:"max_completion_tokens"`
		Stream              bool   `json:"stream"`
		Messages            []struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &or); err != nil {
		return fmt.Errorf("We could not parse the JSON body of your request: %v", err)
	}
	req.Model, req.Stream = or.Model, or.Stream
	req.MaxTokens = max(or.MaxTokens, or.MaxCompletionTokens)
	req.Messages = make([]model.Message, 0, len(or.Messages))
	lastTool := false // the last message was a tool result
	for _, m := range or.Messages {
		switch m.Role {
		case "system", "developer":
			// The system prompt, which decode keeps apart.
			continue
		case "tool":
			// Consecutive tool results form one user message, as in decode.
			if !lastTool {
				req.Messages = append(req.Messages, model.Message{Role: model.RoleUser})
			}
			lastTool = true
			continue
		}
		lastTool = false
		msg := model.Message{Role: model.Role(m.Role)}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Function.Name})
		}
		req.Messages = append(req.Messages, msg)
	}
	return nil
}
