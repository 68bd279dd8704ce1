package wiretest

import (
	"errors"

	"github.com/gorap/gorap/internal/jsonwalk"
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
// calls, walking the body once (internal/jsonwalk): encoding/json's
// validation pass and reflection over a whole history made the stand-in
// cost as much CPU as the runtime it serves.
func shallowAnthropic(body []byte, req *Request) error {
	var r jsonwalk.Reader
	r.Reset(body, "request body")
	var maxTokens int64
	err := r.Object(func(key []byte) error {
		if ok, err := shared(&r, key, req, &maxTokens); ok {
			return err
		}
		switch {
		case jsonwalk.KeyIs(key, "messages"):
			req.Messages = req.Messages[:0]
			return r.Array(func() error {
				var msg model.Message
				err := r.Object(func(key []byte) error {
					switch {
					case jsonwalk.KeyIs(key, "role"):
						return r.StrOf((*string)(&msg.Role), roles)
					case jsonwalk.KeyIs(key, "content"):
						msg.ToolCalls = nil // a repeated key: the last one counts, as in encoding/json
						if r.Peek() == '[' {
							return r.Array(func() error { return toolUse(&r, &msg) })
						}
					}
					return r.Skip()
				})
				if msg.Role != model.RoleAssistant {
					msg.ToolCalls = nil // as decode keeps them: from assistant turns only
				}
				req.Messages = append(req.Messages, msg)
				return err
			})
		}
		return r.Skip()
	})
	if err == nil {
		err = r.End()
	}
	req.MaxTokens = int(maxTokens)
	return err
}

// shared reads a member both wire formats have (the model, max_tokens,
// stream), reporting whether key named one.
func shared(r *jsonwalk.Reader, key []byte, req *Request, maxTokens *int64) (bool, error) {
	switch {
	case jsonwalk.KeyIs(key, "model"):
		return true, r.Str(&req.Model)
	case jsonwalk.KeyIs(key, "max_tokens"):
		return true, r.Int(maxTokens)
	case jsonwalk.KeyIs(key, "stream"):
		return true, r.Bool(&req.Stream)
	}
	return false, nil
}

// toolUse reads a content block, adding it to msg's calls if it is a
// tool_use block.
func toolUse(r *jsonwalk.Reader, msg *model.Message) error {
	var kind, id, name string
	err := r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "type"):
			return r.StrOf(&kind, blockTypes)
		case jsonwalk.KeyIs(key, "id"):
			return r.Str(&id)
		case jsonwalk.KeyIs(key, "name"):
			return r.Str(&name)
		}
		return r.Skip()
	})
	if kind == "tool_use" {
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: id, Name: name})
	}
	return err
}

var (
	roles      = []string{"user", "assistant", "system", "developer", "tool"}
	blockTypes = []string{"tool_use", "tool_result", "text"}
)

// shallowOpenAI reads a Chat Completions request's model, limits and tool
// calls, walking the body once as shallowAnthropic does.
func shallowOpenAI(body []byte, req *Request) error {
	var r jsonwalk.Reader
	r.Reset(body, "request body")
	var maxTokens, maxCompletionTokens int64
	lastTool := false // the last message was a tool result
	err := r.Object(func(key []byte) error {
		if ok, err := shared(&r, key, req, &maxTokens); ok {
			return err
		}
		switch {
		case jsonwalk.KeyIs(key, "max_completion_tokens"):
			return r.Int(&maxCompletionTokens)
		case jsonwalk.KeyIs(key, "messages"):
			req.Messages, lastTool = req.Messages[:0], false // a repeated key: the last one counts
			return r.Array(func() error {
				var msg model.Message
				err := r.Object(func(key []byte) error {
					switch {
					case jsonwalk.KeyIs(key, "role"):
						return r.StrOf((*string)(&msg.Role), roles)
					case jsonwalk.KeyIs(key, "tool_calls"):
						msg.ToolCalls = nil // a repeated key: the last one counts
						return r.Array(func() error { return functionCall(&r, &msg) })
					}
					return r.Skip()
				})
				switch msg.Role {
				case "system", "developer":
					// The system prompt, which decode keeps apart.
				case "tool":
					// Consecutive tool results form one user message, as in decode.
					if !lastTool {
						req.Messages = append(req.Messages, model.Message{Role: model.RoleUser})
					}
					lastTool = true
				default:
					lastTool = false
					if msg.Role != model.RoleAssistant {
						msg.ToolCalls = nil // as decode keeps them: from assistant messages only
					}
					req.Messages = append(req.Messages, msg)
				}
				return err
			})
		}
		return r.Skip()
	})
	if err == nil {
		err = r.End()
	}
	req.MaxTokens = int(max(maxTokens, maxCompletionTokens))
	return err
}

// functionCall reads a tool call of an assistant message into msg.
func functionCall(r *jsonwalk.Reader, msg *model.Message) error {
	var c model.ToolCall
	err := r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "id"):
			return r.Str(&c.ID)
		case jsonwalk.KeyIs(key, "function"):
			return r.Object(func(key []byte) error {
				if jsonwalk.KeyIs(key, "name") {
					return r.Str(&c.Name)
				}
				return r.Skip()
			})
		}
		return r.Skip()
	})
	msg.ToolCalls = append(msg.ToolCalls, c)
	return err
}
