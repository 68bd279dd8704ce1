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

// walkRequest reads a request body in one pass (internal/jsonwalk):
// encoding/json's validation pass and reflection over a whole history made
// the stand-in cost as much CPU as the runtime it serves. It reads the
// model, max_tokens and stream into req, starts req.Messages afresh at
// each "messages" key (the last one counts, as in encoding/json) and hands
// each of its elements to message, which must consume it; other gets any
// other member and must consume it too.
func walkRequest(body []byte, req *Request, message func(r *jsonwalk.Reader) error, other func(r *jsonwalk.Reader, key []byte) error) error {
	var r jsonwalk.Reader
	r.Reset(body, "request body")
	var maxTokens int64
	err := r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "model"):
			return r.Str(&req.Model)
		case jsonwalk.KeyIs(key, "max_tokens"):
			return r.Int(&maxTokens)
		case jsonwalk.KeyIs(key, "stream"):
			return r.Bool(&req.Stream)
		case jsonwalk.KeyIs(key, "messages"):
			req.Messages = req.Messages[:0]
			return r.Array(func() error { return message(&r) })
		}
		return other(&r, key)
	})
	if err == nil {
		err = r.End()
	}
	req.MaxTokens = int(maxTokens)
	return err
}

// readMessage reads a message object's role, handing its other members
// to member; it keeps tool calls only on an assistant message, as decode
// does.
func readMessage(r *jsonwalk.Reader, msg *model.Message, member func(key []byte) error) error {
	err := r.Object(func(key []byte) error {
		if jsonwalk.KeyIs(key, "role") {
			return r.StrOf((*string)(&msg.Role), roles)
		}
		return member(key)
	})
	if msg.Role != model.RoleAssistant {
		msg.ToolCalls = nil
	}
	return err
}

// shallowAnthropic reads a Messages API request's model, limits and tool
// calls.
func shallowAnthropic(body []byte, req *Request) error {
	return walkRequest(body, req, func(r *jsonwalk.Reader) error {
		var msg model.Message
		err := readMessage(r, &msg, func(key []byte) error {
			if jsonwalk.KeyIs(key, "content") {
				msg.ToolCalls = nil // a repeated key: the last one counts
				if r.Peek() == '[' {
					return r.Array(func() error { return toolUse(r, &msg) })
				}
			}
			return r.Skip()
		})
		req.Messages = append(req.Messages, msg)
		return err
	}, func(r *jsonwalk.Reader, _ []byte) error { return r.Skip() })
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
// calls. System and developer messages are left out and consecutive tool
// results form one user message, as decode does.
func shallowOpenAI(body []byte, req *Request) error {
	var maxCompletionTokens int64
	lastTool := false // the last message kept was a tool result
	err := walkRequest(body, req, func(r *jsonwalk.Reader) error {
		if len(req.Messages) == 0 {
			lastTool = false // a new messages array
		}
		var msg model.Message
		err := readMessage(r, &msg, func(key []byte) error {
			if jsonwalk.KeyIs(key, "tool_calls") {
				msg.ToolCalls = nil // a repeated key: the last one counts
				return r.Array(func() error { return functionCall(r, &msg) })
			}
			return r.Skip()
		})
		switch msg.Role {
		case "system", "developer":
		case "tool":
			if !lastTool {
				req.Messages = append(req.Messages, model.Message{Role: model.RoleUser})
			}
			lastTool = true
		default:
			lastTool = false
			req.Messages = append(req.Messages, msg)
		}
		return err
	}, func(r *jsonwalk.Reader, key []byte) error {
		if jsonwalk.KeyIs(key, "max_completion_tokens") {
			return r.Int(&maxCompletionTokens)
		}
		return r.Skip()
	})
	req.MaxTokens = max(req.MaxTokens, int(maxCompletionTokens))
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
