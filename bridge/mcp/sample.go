package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/gorap/gorap/model"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sampling: an MCP server's sampling/createMessage is
// answered by Options.SamplingModel, one of gorap's model providers; the
// tool result then says that sampling happened. Without a model the
// request is declined with a JSON-RPC error that says how to enable it.

// codeSamplingDeclined is the JSON-RPC error code of a declined sampling
// request (MCP uses -1 for "user rejected sampling request").
const codeSamplingDeclined = -1

func (b *Bridge) sample(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
	f, _ := ctx.Value(inflightKey{}).(*inflight)
	if f == nil {
		f = b.inflight.only()
	}
	m := b.opts.SamplingModel
	if m == nil {
		if f != nil {
			f.note(fmt.Sprintf("The MCP server %q asked for a model completion (sampling); the bridge has no model for that, so it declined.", b.opts.Name))
		}
		return nil, &jsonrpc.Error{Code: codeSamplingDeclined, Message: "sampling declined: gorap's MCP bridge was started without a model for sampling (rap bridge mcp --sampling-model PROVIDER:MODEL; inside rap serve the runtime's model is used)"}
	}
	p := req.Params
	mreq := model.Request{System: p.SystemPrompt, MaxTokens: int(p.MaxTokens)}
	for _, msg := range p.Messages {
		if msg == nil {
			continue
		}
		role := model.RoleUser
		if msg.Role == "assistant" {
			role = model.RoleAssistant
		}
		mreq.Messages = append(mreq.Messages, model.Message{Role: role, Text: samplingText(msg.Content)})
	}
	if len(mreq.Messages) == 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "sampling/createMessage has no messages"}
	}
	resp, err := m.Complete(ctx, mreq, nil)
	if err != nil {
		return nil, fmt.Errorf("the model %s failed: %w", m.Name(), err)
	}
	if f != nil {
		f.note(fmt.Sprintf("The MCP server %q asked for a model completion (sampling), answered by %s.", b.opts.Name, m.Name()))
	}
	stop := "endTurn"
	if resp.StopReason == "max_tokens" || resp.StopReason == "length" {
		stop = "maxTokens"
	}
	return &sdk.CreateMessageResult{Role: "assistant", Content: &sdk.TextContent{Text: resp.Text}, Model: m.Name(), StopReason: stop}, nil
}

// samplingText is the text of one sampling message for a text model.
func samplingText(c sdk.Content) string {
	switch v := c.(type) {
	case *sdk.TextContent:
		return v.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes; not passed to the model]", v.MIMEType, len(v.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes; not passed to the model]", v.MIMEType, len(v.Data))
	case nil:
		return ""
	default:
		return strings.TrimSpace(fmt.Sprintf("[%T content not passed to the model]", c))
	}
}
