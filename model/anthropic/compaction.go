package anthropic

// Server-side compaction (the beta "compact-2026-01-12"). A request with
// model.Request.CompactAt carries the beta header and a context_management
// edit of type compact_20260112 whose trigger is that many input tokens;
// when the conversation passes it, the API summarises it before it answers
// and streams a "compaction" content block first. The block is handed to
// the caller exactly as it arrived (model.Response.Compaction); a later
// request carries it (model.Request.Compaction) as the first block of its
// first assistant message, with the messages that followed it, and the
// API reads the summary instead of everything before it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/gorap/gorap/internal/jsonwalk"
	"github.com/gorap/gorap/model"
)

// compactionModels are the models Anthropic documents server-side
// compaction for ("Compaction", platform.claude.com/docs/en/build-with-claude/compaction;
// the SDK states no list): a model whose name is one of them, or starts
// with one and a separator (a dated snapshot), has it. This is the one
// list; Options.ServerCompaction overrides it for a model released later.
var compactionModels = []string{"claude-opus-4-6", "claude-sonnet-4-6"}

// CompactionBeta is the beta header value that turns server-side
// compaction on.
const CompactionBeta = string(sdk.AnthropicBetaCompact2026_01_12)

// MinCompactionTrigger is the fewest input tokens the API takes as a
// compaction trigger.
const MinCompactionTrigger = 50_000

// compactionSupported reports whether the model name is one of
// compactionModels or a snapshot of one.
func compactionSupported(name string) bool {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, m := range compactionModels {
		if name == m || (strings.HasPrefix(name, m) && strings.IndexByte("-.@:_", name[len(m)]) >= 0) {
			return true
		}
	}
	return false
}

// ServerCompaction implements model.ServerCompactor: the provider's model
// compacts on the API's side when Anthropic documents it for the model
// (or Options.ServerCompaction says so).
func (p *Provider) ServerCompaction() (int, error) {
	if p.compaction {
		return MinCompactionTrigger, nil
	}
	return 0, fmt.Errorf("anthropic:%s has no server-side compaction: Anthropic offers it for %s only (set anthropic.Options.ServerCompaction for a later model that has it)",
		p.model, strings.Join(compactionModels, " and "))
}

// contextManagement is the encoding of the context_management member for
// one trigger, kept by the provider: every request of a runtime has the
// same.
type contextManagement struct {
	trigger int
	enc     []byte
}

// contextManagementFor returns `"context_management":{…},` for a trigger of
// tokens input tokens, as the SDK encodes BetaContextManagementConfigParam.
func (p *Provider) contextManagementFor(tokens int) ([]byte, error) {
	if last := p.ctxMgmt.Load(); last != nil && last.trigger == tokens {
		return last.enc, nil
	}
	cm := sdk.BetaContextManagementConfigParam{Edits: []sdk.BetaContextManagementConfigEditUnionParam{{
		OfCompact20260112: &sdk.BetaCompact20260112EditParam{Trigger: sdk.BetaInputTokensTriggerParam{Value: int64(tokens)}},
	}}}
	v, err := json.Marshal(cm)
	if err != nil {
		return nil, fmt.Errorf("anthropic: encode context_management: %w", err)
	}
	enc := append(append([]byte(`"context_management":`), v...), ',')
	p.ctxMgmt.Store(&contextManagement{trigger: tokens, enc: enc})
	return enc, nil
}

// appendCompactionMessage appends the assistant message that carries a
// stored compaction block: the block's bytes as they arrived, with a
// cache_control breakpoint added as its last member, so the API can serve
// the tools, the system prompt and the summary from its prompt cache. The
// API joins it with the assistant message that follows, if any, into one
// turn that starts with the block.
func appendCompactionMessage(b, block []byte) ([]byte, error) {
	block = bytes.TrimSpace(block)
	if len(block) < 2 || block[0] != '{' || block[len(block)-1] != '}' || !json.Valid(block) {
		return b, errors.New("anthropic: the stored compaction block is not a JSON object; it cannot be sent back")
	}
	b = append(b, `{"content":[`...)
	b = append(b, block[:len(block)-1]...)
	if len(bytes.TrimSpace(block[1:len(block)-1])) > 0 {
		b = append(b, ',')
	}
	b = append(b, `"cache_control":{"type":"ephemeral"}}`...)
	return append(b, `],"role":"assistant"}`...), nil
}

// compactionBlock is a compaction block being assembled from its stream
// events: the content_block of its content_block_start as it arrived,
// then what its deltas set.
type compactionBlock struct {
	start                       []byte // a copy
	content, encrypted, sig     string
	hasContent, hasEnc, sigSeen bool
}

// startCompaction reads the content_block member of a content_block_start
// event's data.
func startCompaction(data []byte) (*compactionBlock, error) {
	var r jsonwalk.Reader
	r.Reset(data, "anthropic stream event")
	var raw []byte
	err := r.Object(func(key []byte) error {
		if !jsonwalk.KeyIs(key, "content_block") {
			return r.Skip()
		}
		var err error
		raw, err = r.Raw()
		return err
	})
	if err != nil {
		return nil, err
	}
	return &compactionBlock{start: slices.Clone(raw)}, nil
}

// delta folds in a compaction_delta (the summary and opaque state, each
// replacing what came before, as the SDK's accumulator does) or a
// signature_delta (appended).
func (c *compactionBlock) delta(ev *event) {
	d := &ev.Delta
	switch d.Type {
	case "compaction_delta":
		if d.Content != "" {
			c.content, c.hasContent = d.Content, true
		}
		if d.EncryptedContent != "" {
			c.encrypted, c.hasEnc = d.EncryptedContent, true
		}
	case "signature_delta":
		c.sig += d.Signature
		c.sigSeen = c.sigSeen || d.Signature != ""
	}
}

// block returns the finished block: the start block's bytes, with the
// members the deltas set replaced in place (or added at its end) and every
// other byte as it arrived; and its summary text, "" when the compaction
// failed (the API's null content).
func (c *compactionBlock) block() (raw []byte, summary string, err error) {
	var set []member
	if c.hasContent {
		set = append(set, member{"content", appendJSONString(nil, c.content)})
	}
	if c.hasEnc {
		set = append(set, member{"encrypted_content", appendJSONString(nil, c.encrypted)})
	}
	if c.sigSeen {
		set = append(set, member{"signature", appendJSONString(nil, c.sig)})
	}
	raw, err = setMembers(c.start, set)
	if err != nil {
		return nil, "", fmt.Errorf("the compaction block is not a JSON object: %w", err)
	}
	if c.hasContent {
		return raw, c.content, nil
	}
	var r jsonwalk.Reader
	r.Reset(raw, "compaction block")
	err = r.Object(func(key []byte) error {
		if string(key) == "content" && r.Peek() == '"' {
			return r.Str(&summary)
		}
		return r.Skip()
	})
	return raw, summary, err
}

// member is an object member to set: its key and its value's JSON.
type member struct {
	key   string
	value []byte
}

// setMembers returns obj, a JSON object, with the value of each member of
// set replaced where obj has that key, and added at its end where it has
// not; every other byte of obj is kept.
func setMembers(obj []byte, set []member) ([]byte, error) {
	if len(set) == 0 {
		return obj, nil
	}
	type span struct {
		start, end int
		value      []byte
	}
	var spans []span
	done := make([]bool, len(set))
	var r jsonwalk.Reader
	r.Reset(obj, "compaction block")
	if r.Peek() != '{' {
		return nil, r.Fail("not an object")
	}
	members := 0
	err := r.Object(func(key []byte) error {
		members++
		v, err := r.Raw()
		if err != nil {
			return err
		}
		for i, m := range set {
			if string(key) == m.key {
				end := r.Offset()
				spans = append(spans, span{end - len(v), end, m.value})
				done[i] = true
			}
		}
		return nil
	})
	if err == nil {
		err = r.End()
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+64)
	at := 0
	for _, s := range spans {
		out = append(out, obj[at:s.start]...)
		out = append(out, s.value...)
		at = s.end
	}
	rest := bytes.TrimRight(obj[at:], " \t\r\n")
	out = append(out, rest[:len(rest)-1]...) // all but the closing brace
	empty := members == 0
	for i, m := range set {
		if done[i] {
			continue
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = appendJSONString(out, m.key)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

// compactionUsage reads what a compaction cost from the usage of a
// message_start or message_delta event: its iteration of type
// "compaction" (usage.iterations, or message.usage.iterations), the
// top-level figures being the answer's alone. ok is false when the event
// has none.
func compactionUsage(data []byte) (u model.Usage, ok bool, err error) {
	var r jsonwalk.Reader
	r.Reset(data, "anthropic stream event")
	usageObj := func() error {
		return r.Object(func(key []byte) error {
			if !jsonwalk.KeyIs(key, "iterations") {
				return r.Skip()
			}
			return r.Array(func() error {
				var it eventUsage
				var typ string
				err := r.Object(func(key []byte) error {
					switch {
					case jsonwalk.KeyIs(key, "type"):
						return r.Str(&typ)
					case jsonwalk.KeyIs(key, "input_tokens"):
						return r.Int(&it.InputTokens)
					case jsonwalk.KeyIs(key, "output_tokens"):
						return r.Int(&it.OutputTokens)
					case jsonwalk.KeyIs(key, "cache_read_input_tokens"):
						return r.Int(&it.CacheReadInputTokens)
					case jsonwalk.KeyIs(key, "cache_creation_input_tokens"):
						return r.Int(&it.CacheCreationInputTokens)
					}
					return r.Skip()
				})
				if err == nil && typ == "compaction" {
					u, ok = modelUsage(it), true
				}
				return err
			})
		})
	}
	err = r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "usage"):
			return usageObj()
		case jsonwalk.KeyIs(key, "message"):
			return r.Object(func(key []byte) error {
				if jsonwalk.KeyIs(key, "usage") {
					return usageObj()
				}
				return r.Skip()
			})
		}
		return r.Skip()
	})
	return u, ok, err
}

// modelUsage is the model's form of a usage object: InputTokens counts
// every input token, those read from and written to the cache included.
func modelUsage(u eventUsage) model.Usage {
	return model.Usage{
		InputTokens:           u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		CachedInputTokens:     u.CacheReadInputTokens,
		CacheWriteInputTokens: u.CacheCreationInputTokens,
		OutputTokens:          u.OutputTokens,
	}
}

var _ model.ServerCompactor = (*Provider)(nil)
