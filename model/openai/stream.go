package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/gorap/gorap/model"
)

// chunk is what the accumulator reads of one streamed
// chat.completion.chunk, decoded as encoding/json would decode it into
// this struct, without its reflection (chunk.go): the SDK's
// ChatCompletionChunk decodes, by reflection, every field the API defines
// and keeps the raw JSON of each (12 % of the runtime's CPU in
// an OpenAI cycle). A chunk encoding/json would refuse (a value of an
// unexpected type from a lenient server) is decoded by the SDK's type
// instead, which accepts what it accepted before. Unlike the SDK's
// decoder, encoding/json matches member names regardless of case and takes
// the last of two equal names; no server is known to send either.
type chunk struct {
	Choices []chunkChoice `json:"choices"`
	Usage   chunkUsage    `json:"usage"`
}

type chunkChoice struct {
	Index        int64      `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason string     `json:"finish_reason"`
}

type chunkDelta struct {
	Content   string          `json:"content"`
	ToolCalls []chunkToolCall `json:"tool_calls"`
}

type chunkToolCall struct {
	Index    int64  `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chunkUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// chunkFromSDK copies what the accumulator reads of an SDK chunk.
func chunkFromSDK(full sdk.ChatCompletionChunk) chunk {
	var c chunk
	u := full.Usage
	c.Usage.PromptTokens, c.Usage.CompletionTokens = u.PromptTokens, u.CompletionTokens
	c.Usage.PromptTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	for _, ch := range full.Choices {
		cc := chunkChoice{Index: ch.Index, FinishReason: ch.FinishReason}
		cc.Delta.Content = ch.Delta.Content
		for _, tc := range ch.Delta.ToolCalls {
			t := chunkToolCall{Index: tc.Index, ID: tc.ID}
			t.Function.Name, t.Function.Arguments = tc.Function.Name, tc.Function.Arguments
			cc.Delta.ToolCalls = append(cc.Delta.ToolCalls, t)
		}
		c.Choices = append(c.Choices, cc)
	}
	return c
}

// call is one tool call being assembled from chunks.
type call struct {
	id, name string
	args     strings.Builder
}

// accumulator assembles a streamed completion from its chunks. Only choice
// 0 is read; the provider never asks for more.
type accumulator struct {
	text   strings.Builder
	calls  []*call
	slot   map[int64]int // chunk tool-call index -> position in calls
	finish string
	usage  model.Usage
	size   int
	// The request's tools and history, where response looks up the tool
	// name of each function name that came back (toolName).
	tools   []model.ToolSpec
	history []model.Message
}

func (a *accumulator) grow(n int) error {
	a.size += n
	if a.size > maxOutputBytes {
		return fmt.Errorf("the response exceeds %d bytes; lower max tokens", maxOutputBytes)
	}
	return nil
}

// add folds one chunk in, passing text deltas to s.
func (a *accumulator) add(ch chunk, s model.Stream) error {
	if u := ch.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
		a.usage = model.Usage{InputTokens: u.PromptTokens, CachedInputTokens: u.PromptTokensDetails.CachedTokens, OutputTokens: u.CompletionTokens}
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue
		}
		if d := choice.Delta.Content; d != "" {
			if err := a.grow(len(d)); err != nil {
				return err
			}
			a.text.WriteString(d)
			if s != nil {
				s.TextDelta(d)
			}
		}
		for _, tc := range choice.Delta.ToolCalls {
			if err := a.addCall(tc); err != nil {
				return err
			}
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
	return nil
}

// addCall folds in one tool-call fragment. Fragments are matched by index;
// a fragment that brings a new id for an index already in use starts a new
// call, since some servers send every call whole at index 0.
func (a *accumulator) addCall(tc chunkToolCall) error {
	if a.slot == nil {
		a.slot = map[int64]int{}
	}
	pos, ok := a.slot[tc.Index]
	if !ok || (tc.ID != "" && a.calls[pos].id != "" && a.calls[pos].id != tc.ID) {
		if len(a.calls) >= maxToolCalls {
			return fmt.Errorf("the response has more than %d tool calls", maxToolCalls)
		}
		a.calls = append(a.calls, &call{})
		pos = len(a.calls) - 1
		a.slot[tc.Index] = pos
	}
	c := a.calls[pos]
	if tc.ID != "" {
		c.id = tc.ID
	}
	if tc.Function.Name != "" && c.name == "" {
		c.name = tc.Function.Name
	}
	if err := a.grow(len(tc.Function.Arguments)); err != nil {
		return err
	}
	c.args.WriteString(tc.Function.Arguments)
	return nil
}

// stopReasons maps finish reasons to the shared vocabulary.
var stopReasons = map[string]string{"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}

// response is the assembled assistant turn.
func (a *accumulator) response(modelID string) (*model.Response, error) {
	resp := &model.Response{Text: a.text.String(), StopReason: a.finish, Usage: a.usage}
	if r, ok := stopReasons[a.finish]; ok {
		resp.StopReason = r
	}
	for i, c := range a.calls {
		if c.name == "" {
			return nil, fmt.Errorf("openai: %s: tool call %d (id %q) has no function name; retry the request", modelID, i, c.id)
		}
		args := strings.TrimSpace(c.args.String())
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return nil, fmt.Errorf("openai: %s: tool call %d (%s) has arguments that are not valid JSON; retry the request", modelID, i, c.name)
		}
		name := toolName(a.tools, a.history, c.name)
		id := c.id
		if id == "" {
			id = newCallID()
		}
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)})
	}
	return resp, nil
}
