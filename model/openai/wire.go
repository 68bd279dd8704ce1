package openai

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/gorap/gorap/model"
)

// The request body. It is the SDK's own encoding of
// sdk.ChatCompletionNewParams, byte for byte, built piece by piece, the
// messages written straight from the turns (turn.go): each settled turn
// is encoded once and kept in the conversation's model.WireCache, so a
// completion encodes only the turns added since; the SDK still does the
// HTTP and retries (option.WithRequestBody) and splits the event stream.
//
// Prompt caching: OpenAI-compatible APIs cache the longest
// prefix they saw recently, by itself. The request keeps that prefix
// stable: the tools, then the system message, then the settled turns,
// always in the same order and the same bytes.

// wireKey names this provider's wire form in a WireCache.
func (p *Provider) wireKey() string {
	return "openai\x00" + p.model + "\x00" + strconv.FormatBool(p.images) + strconv.FormatBool(p.public)
}

// body appends the Chat Completions request for req to dst.
func (p *Provider) body(dst []byte, req model.Request) ([]byte, error) {
	limit := req.MaxTokens
	if limit <= 0 {
		limit = p.maxTokens
	}
	w := req.Wire
	if w != nil {
		w.Lock()
		defer w.Unlock()
	}
	turns, base, stable, starts, err := model.NormalizeCached(req, w, p.wireKey())
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if base+len(turns) == 0 {
		return nil, errors.New("openai: the request has no messages with content: add a user message")
	}
	if w == nil {
		stable = 0
	}
	return p.encodeBody(dst, limit, req.System, req.Tools, turns, base, stable, starts, w, req.SettledSeq)
}

// encodeBody appends to dst the body of turns [base, base+len(turns)); with w
// (locked by the caller) the stable turns come from, and go to, the cache,
// which holds at least the first base ones. Each turn not in the cache is
// encoded once, into the body, and the stable ones among them are copied
// from there into the cache.
func (p *Provider) encodeBody(dst []byte, limit int, system string, tools []model.ToolSpec, turns []model.Turn, base, stable int, starts []int, w *model.WireCache, seq int64) ([]byte, error) {
	count := base + len(turns)
	var cached []byte
	var ends []int
	if w != nil {
		cached, ends = w.Prefix(p.wireKey(), stable, seq)
	}
	lim := strconv.Itoa(limit)
	var sys, tail []byte
	if w != nil {
		if parts, ok := w.Head(system, tools); ok && string(parts[2]) == lim {
			sys, tail = parts[0], parts[1]
		}
	}
	if tail == nil {
		var err error
		if sys, tail, err = p.encodeHead(limit, system, tools); err != nil {
			return nil, err
		}
		if w != nil {
			w.SetHead(system, tools, sys, tail, []byte(lim))
		}
	}
	k := len(ends)
	if k < base {
		return nil, fmt.Errorf("openai: internal error: %d turns cached, %d needed", k, base)
	}
	size := 16 + len(sys) + len(tail)
	if k > 0 {
		size += ends[k-1]
	}
	b := model.GrowBody(dst[:0], size+1024*(count-k))
	b = append(b, `{"messages":[`...)
	b = append(b, sys...)
	if k > 0 {
		b = append(b, cached[:ends[k-1]]...)
	}
	caching := w != nil
	for i := k; i < count; i++ {
		t := turns[i-base]
		pos := len(b)
		var err error
		if b, err = p.appendTurn(b, t); err != nil {
			return nil, fmt.Errorf("openai: conversation turn %d (%s): %w", i, t.Role, err)
		}
		if caching && i < stable { // stable turns never change: cache them as sent
			caching = w.ExtendFrom(b[pos:], seq, starts[i-base])
		}
	}
	b = bytes.TrimSuffix(b, []byte(","))
	b = append(b, tail...)
	return b, nil
}

// encodeHead encodes the system message (followed by a comma) and what
// follows the messages: `],"model":…,"max_tokens":…,"tools":…}`.
func (p *Provider) encodeHead(limit int, system string, tools []model.ToolSpec) (sys, tail []byte, err error) {
	if tail, err = p.encodeTail(limit, tools); err != nil {
		return nil, nil, err
	}
	if system != "" {
		// As sdk.SystemMessage(system) marshals (turn.go).
		sys = appendSystem(make([]byte, 0, len(system)+40), system)
	}
	return sys, tail, nil
}

// encodedTail is the part of a request after the messages for one token
// limit and list of tools, kept by the provider: it is the same for every
// thread of a runtime while the system prompt, which names the thread, is
// not, so a thread's first completion reuses it.
type encodedTail struct {
	limit int
	tools []model.ToolSpec
	enc   []byte
}

// encodeTail encodes `],"model":…,"max_tokens":…,"tools":…,"stream":true}`.
func (p *Provider) encodeTail(limit int, tools []model.ToolSpec) ([]byte, error) {
	if last := p.tail.Load(); last != nil && last.limit == limit && slices.EqualFunc(last.tools, tools, sameTool) {
		return last.enc, nil
	}
	params := sdk.ChatCompletionNewParams{Model: shared.ChatModel(p.model), Messages: []sdk.ChatCompletionMessageParamUnion{}, StreamOptions: streamOptions}
	if p.public {
		params.MaxCompletionTokens = sdk.Int(int64(limit))
	} else {
		params.MaxTokens = sdk.Int(int64(limit))
	}
	for i, t := range tools {
		fn, err := functionParam(t)
		if err != nil {
			return nil, fmt.Errorf("openai: tools[%d] (%s): %w", i, t.Name, err)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	all, err := params.MarshalJSON()
	if err != nil {
		return nil, err
	}
	const open = `{"messages":[`
	if !bytes.HasPrefix(all, []byte(open+"]")) {
		return nil, fmt.Errorf("openai: the SDK encodes requests in an unexpected form (%.40s...): report this", all)
	}
	// "stream":true last, where the SDK's NewStreaming puts it (with sjson,
	// over the whole body, for each request).
	tail := append(all[len(open):len(all)-1:len(all)-1], `,"stream":true}`...)
	p.tail.Store(&encodedTail{limit: limit, tools: slices.Clone(tools), enc: tail})
	return tail, nil
}

func sameTool(a, b model.ToolSpec) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema)
}
