package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/gorap/gorap/model"
)

// The request body. It is the SDK's own encoding
// of sdk.MessageNewParams, byte for byte, but built piece by piece: each
// settled turn is encoded once and kept in the conversation's
// model.WireCache, so a completion encodes only the turns added since; the
// SDK still does the HTTP, retries and stream decoding
// (option.WithRequestBody).
//
// Prompt caching: a cache_control breakpoint ends the stable head (the
// tools and the system prompt, which the API puts before the messages) and
// another the last stable turn, so the API can serve everything up to it
// from its prompt cache.

// encodedHead is the encoding of the request parts after the messages for
// one system prompt and set of tools: the provider keeps the last one, so
// that a thread's first completions, which have no WireCache entry yet, do
// not encode the tools again either.
type encodedHead struct {
	system string
	tools  []model.ToolSpec
	enc    []byte
}

func sameTool(a, b model.ToolSpec) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema)
}

// wireKey names this provider's wire form in a WireCache.
func (p *Provider) wireKey() string {
	return "anthropic\x00" + p.model + "\x00" + strconv.FormatBool(p.images)
}

// body encodes the Messages API request for req, as MessageNewParams.
func (p *Provider) body(req model.Request) ([]byte, error) { return p.encode(nil, req, false) }

// encode appends the Messages API request for req to dst; stream adds
// "stream":true at the end, where the SDK's NewStreaming puts it.
func (p *Provider) encode(dst []byte, req model.Request, stream bool) ([]byte, error) {
	limit := req.MaxTokens
	if limit <= 0 {
		limit = p.maxTokens
	}
	w := req.Wire
	if w != nil {
		w.Lock()
		defer w.Unlock()
	}
	nt, err := p.normalize(req, w)
	if err != nil {
		return nil, err
	}
	if nt.base+len(nt.turns) == 0 {
		return nil, errors.New("anthropic: the request has no messages with content: add a user message")
	}
	var pre []byte // what goes before max_tokens
	if req.CompactAt > 0 || len(req.Compaction) > 0 {
		if _, err := p.ServerCompaction(); err != nil {
			return nil, fmt.Errorf("anthropic: the request asks for server-side compaction, but %w", err)
		}
	}
	if req.CompactAt > 0 {
		if req.CompactAt < MinCompactionTrigger {
			return nil, fmt.Errorf("anthropic: a compaction trigger of %d input tokens is below the API's least, %d: raise the context window or the share it compacts at", req.CompactAt, MinCompactionTrigger)
		}
		if pre, err = p.contextManagementFor(req.CompactAt); err != nil {
			return nil, err
		}
	}
	return p.encodeBody(dst, limit, req.System, req.Tools, nt, w, req.SettledSeq, stream, pre, req.Compaction)
}

// normalized is a request's conversation turns from turn base on: the
// turns before base come from the wire cache. starts holds the index in
// the request's messages of each turn's first message.
type normalized struct {
	turns        []model.Turn
	base, stable int
	starts       []int
}

// normalize normalises req's conversation, with w (locked by the
// caller) only from the last cached turn on (model.NormalizeCached).
func (p *Provider) normalize(req model.Request, w *model.WireCache) (normalized, error) {
	turns, base, stable, starts, err := model.NormalizeCached(req, w, p.wireKey())
	if err != nil {
		return normalized{}, fmt.Errorf("anthropic: %w", err)
	}
	return normalized{turns: turns, base: base, stable: stable, starts: starts}, nil
}

// turn returns turn i (i >= base).
func (nt *normalized) turn(i int) model.Turn { return nt.turns[i-nt.base] }

// encodeBody appends the body to dst; with w (locked by the caller) the
// stable turns come from, and go to, the cache, each encoded once: the
// last of them, the breakpoint, is cached without its cache_control and
// sent with one inserted where appendTurn marked. pre, when set, is the
// context_management member and its comma; compaction, when set, a stored
// compaction block, sent as the first message (appendCompactionMessage),
// before the turns and outside the cache.
func (p *Provider) encodeBody(dst []byte, limit int, system string, tools []model.ToolSpec, nt normalized, w *model.WireCache, seq int64, stream bool, pre, compaction []byte) ([]byte, error) {
	stable, count := nt.stable, nt.base+len(nt.turns)
	var cached []byte
	var ends []int
	if w != nil {
		cached, ends = w.Prefix(p.wireKey(), stable, seq)
	}
	head, err := p.headFor(system, tools, w)
	if err != nil {
		return nil, err
	}
	k := len(ends) // turns taken from the cache; Prefix keeps no more than stable
	if k < nt.base {
		return nil, fmt.Errorf("anthropic: internal error: %d turns cached, %d needed", k, nt.base)
	}
	size := 64 + len(head) + len(pre) + len(compaction)
	if k > 0 {
		size += ends[k-1]
	}
	b := model.GrowBody(dst[:0], size+1024*(count-k))
	b = append(b, '{')
	b = append(b, pre...)
	b = append(b, `"max_tokens":`...)
	b = strconv.AppendInt(b, int64(limit), 10)
	b = append(b, `,"messages":[`...)
	if len(compaction) > 0 {
		if b, err = appendCompactionMessage(b, compaction); err != nil {
			return nil, err
		}
		b = append(b, ',') // count > 0: encode checked
	}
	bp := stable - 1 // the breakpoint turn, if any
	switch {
	case k == 0:
	case bp == k-1: // the breakpoint is the last cached turn
		from := 0
		if bp > 0 {
			from = ends[bp-1]
		}
		b = append(b, cached[:from]...)
		if at := w.Mark(bp); at >= 0 {
			b = withBreakpoint(b, cached[from:ends[bp]], at)
		} else { // a turn without a block has nowhere to mark
			b = append(b, cached[from:ends[bp]]...)
		}
	default:
		b = append(b, cached[:ends[k-1]]...)
	}
	caching := w != nil
	for i := k; i < count; i++ {
		pos := len(b)
		var at int
		b, at, err = p.appendTurn(b, nt.turn(i))
		if err != nil {
			return nil, fmt.Errorf("anthropic: conversation turn %d (%s): %w", i, nt.turn(i).Role, err)
		}
		if i < count-1 {
			b = append(b, ',')
		}
		if caching && i < stable { // stable turns never change: cache them as sent
			caching = w.ExtendMarked(b[pos:], seq, nt.starts[i-nt.base], at)
		}
		if i == bp && at >= 0 {
			b = slices.Insert(b, pos+at, cacheControl...)
		}
	}
	b = append(b, ']')
	b = append(b, head...)
	if stream {
		b = append(b, `,"stream":true`...)
	}
	b = append(b, '}')
	return b, nil
}

// headFor returns the encoding of the parts after the messages for system
// and tools: from w (locked by the caller), else the provider's last one,
// else encoded now and kept in both.
func (p *Provider) headFor(system string, tools []model.ToolSpec, w *model.WireCache) ([]byte, error) {
	if w != nil {
		if parts, ok := w.Head(system, tools); ok {
			return parts[0], nil
		}
	}
	var head []byte
	if last := p.head.Load(); last != nil && last.system == system && slices.EqualFunc(last.tools, tools, sameTool) {
		head = last.enc
	} else {
		var err error
		if head, err = p.encodeHead(system, tools); err != nil {
			return nil, err
		}
		p.head.Store(&encodedHead{system: system, tools: slices.Clone(tools), enc: head})
	}
	if w != nil {
		w.SetHead(system, tools, head)
	}
	return head, nil
}

// encodeHead encodes what follows the messages: `,"model":…,"system":…,"tools":…`,
// with a cache_control breakpoint on the last of them.
func (p *Provider) encodeHead(system string, tools []model.ToolSpec) ([]byte, error) {
	// The system prompt is one text block, written by hand as the SDK
	// would write []sdk.TextBlockParam (its reflection took ~50 µs per
	// thread's prompt); TestWireCacheSendsFromScratchBytes compares.
	b := append(make([]byte, 0, 64+len(system)+len(p.model)), `,"model":`...)
	b = appendJSONString(b, p.model)
	if system != "" {
		// The API reads tools, then system, then messages: the breakpoint
		// on the system prompt (else the last tool) caches both.
		b = append(b, `,"system":[`...)
		var at int // where the block's cache_control goes, in b
		b, at = appendTextBlock(b, system)
		b = slices.Insert(b, at, cacheControl...)
		b = append(b, ']')
	}
	if len(tools) > 0 {
		ts, err := p.encodeTools(tools, system == "")
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"tools":`...), ts...)
	}
	return b, nil
}

// encodedTools is the encoding of one list of tools, kept by the provider:
// the tools are the same for every thread of a runtime while the system
// prompt, which names the thread, is not, so a thread's first completion
// reuses them.
type encodedTools struct {
	tools      []model.ToolSpec
	breakpoint bool
	enc        []byte
}

// encodeTools encodes the tools array; breakpoint puts a cache_control on
// the last tool.
func (p *Provider) encodeTools(tools []model.ToolSpec, breakpoint bool) ([]byte, error) {
	if last := p.tools.Load(); last != nil && last.breakpoint == breakpoint && slices.EqualFunc(last.tools, tools, sameTool) {
		return last.enc, nil
	}
	params := make([]sdk.ToolUnionParam, 0, len(tools))
	for i, t := range tools {
		tool, err := toolParam(t)
		if err != nil {
			return nil, fmt.Errorf("anthropic: tools[%d] (%s): %w", i, t.Name, err)
		}
		params = append(params, sdk.ToolUnionParam{OfTool: tool})
	}
	if breakpoint {
		params[len(params)-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	enc, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	p.tools.Store(&encodedTools{tools: slices.Clone(tools), breakpoint: breakpoint, enc: enc})
	return enc, nil
}

// setCacheControl marks the last block that can carry a breakpoint.
func setCacheControl(blocks []sdk.ContentBlockParamUnion) {
	cc := sdk.NewCacheControlEphemeralParam()
	for i := len(blocks) - 1; i >= 0; i-- {
		switch b := &blocks[i]; {
		case b.OfText != nil:
			b.OfText.CacheControl = cc
		case b.OfToolResult != nil:
			b.OfToolResult.CacheControl = cc
		case b.OfToolUse != nil:
			b.OfToolUse.CacheControl = cc
		case b.OfImage != nil:
			b.OfImage.CacheControl = cc
		default:
			continue
		}
		return
	}
}
