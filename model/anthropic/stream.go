package anthropic

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gorap/gorap/model"
)

// maxBlocks bounds the content blocks of one response.
const maxBlocks = 1024

// block is one content block being assembled from stream events.
type block struct {
	kind     string // "text", "tool_use", "compaction" or another type, which is ignored
	id, name string
	buf      strings.Builder  // text, or the tool input's JSON
	compact  *compactionBlock // a compaction block (compaction.go)
}

// accumulator assembles a streamed message from its events.
type accumulator struct {
	blocks map[int64]*block
	stop   string
	size   int
	usage  model.Usage
	// compactUsage is what the compaction cost, when the API reported it
	// apart (compactionUsage).
	compactUsage model.Usage
	compacted    bool // a compaction block started
}

func (a *accumulator) grow(n int) error {
	a.size += n
	if a.size > maxOutputBytes {
		return fmt.Errorf("the response exceeds %d bytes; lower max tokens", maxOutputBytes)
	}
	return nil
}

// event is one event of a Messages API stream: the fields the accumulator
// reads, decoded by encoding/json (ssestream.Stream[event]).
type event struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message struct {
		StopReason string     `json:"stop_reason"`
		Usage      eventUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
		// A compaction block's summary and opaque state (compaction_delta)
		// and signature (signature_delta).
		Content          string `json:"content"`
		EncryptedContent string `json:"encrypted_content"`
		Signature        string `json:"signature"`
	} `json:"delta"`
	Usage eventUsage `json:"usage"`
}

// eventUsage is the token usage of a message_start or message_delta event.
type eventUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// add folds one stream event in, passing text deltas to s. data is the
// event as it arrived, from which a compaction block is kept byte for
// byte.
func (a *accumulator) add(ev *event, data []byte, s model.Stream) error {
	if a.blocks == nil {
		a.blocks = map[int64]*block{}
	}
	if a.compacted && (ev.Type == "message_delta" || ev.Type == "message_start") {
		u, ok, err := compactionUsage(data)
		if err != nil {
			return err
		}
		if ok {
			a.compactUsage = u
		}
	}
	switch ev.Type {
	case "message_start":
		a.stop = ev.Message.StopReason
		u := ev.Message.Usage
		a.usage.CachedInputTokens = u.CacheReadInputTokens
		a.usage.CacheWriteInputTokens = u.CacheCreationInputTokens
		a.usage.InputTokens = u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		a.usage.OutputTokens = u.OutputTokens
	case "content_block_start":
		cb := ev.ContentBlock
		b := &block{kind: cb.Type, id: cb.ID, name: cb.Name}
		if _, dup := a.blocks[ev.Index]; dup {
			return fmt.Errorf("content block %d started twice in the stream", ev.Index)
		}
		if len(a.blocks) >= maxBlocks {
			return fmt.Errorf("the response has more than %d content blocks", maxBlocks)
		}
		a.blocks[ev.Index] = b
		if cb.Type == "compaction" {
			c, err := startCompaction(data)
			if err != nil {
				return err
			}
			if err := a.grow(len(c.start)); err != nil {
				return err
			}
			b.compact, a.compacted = c, true
		}
		if cb.Type == "text" && cb.Text != "" {
			if err := a.grow(len(cb.Text)); err != nil {
				return err
			}
			b.buf.WriteString(cb.Text)
			if s != nil {
				s.TextDelta(cb.Text)
			}
		}
	case "content_block_delta":
		b, ok := a.blocks[ev.Index]
		if !ok {
			return fmt.Errorf("delta for content block %d, which never started", ev.Index)
		}
		switch ev.Delta.Type {
		case "text_delta":
			if err := a.grow(len(ev.Delta.Text)); err != nil {
				return err
			}
			b.buf.WriteString(ev.Delta.Text)
			if s != nil && ev.Delta.Text != "" {
				s.TextDelta(ev.Delta.Text)
			}
		case "input_json_delta":
			if err := a.grow(len(ev.Delta.PartialJSON)); err != nil {
				return err
			}
			b.buf.WriteString(ev.Delta.PartialJSON)
		case "compaction_delta", "signature_delta":
			if b.compact != nil {
				if err := a.grow(len(ev.Delta.Content) + len(ev.Delta.EncryptedContent) + len(ev.Delta.Signature)); err != nil {
					return err
				}
				b.compact.delta(ev)
			}
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			a.stop = ev.Delta.StopReason
		}
		if u := ev.Usage; u.OutputTokens > 0 {
			a.usage.OutputTokens = u.OutputTokens
		}
	}
	return nil
}

// response is the assembled assistant turn. Text blocks are joined in order;
// each tool_use block becomes a ToolCall with its input as arguments; the
// last compaction block that holds a summary is the Compaction (one with
// none, a compaction that failed, changes nothing).
func (a *accumulator) response(modelID string) (*model.Response, error) {
	idx := make([]int64, 0, len(a.blocks))
	for i := range a.blocks {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	resp := &model.Response{StopReason: a.stop, Usage: a.usage}
	var text strings.Builder
	for _, i := range idx {
		b := a.blocks[i]
		switch b.kind {
		case "text":
			text.WriteString(b.buf.String())
		case "tool_use":
			args := strings.TrimSpace(b.buf.String())
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return nil, fmt.Errorf("anthropic: %s: tool_use block %d (id %s, tool %s) streamed input that is not valid JSON; retry the request", modelID, i, b.id, b.name)
			}
			resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: b.id, Name: b.name, Arguments: json.RawMessage(args)})
		case "compaction":
			raw, summary, err := b.compact.block()
			if err != nil {
				return nil, fmt.Errorf("anthropic: %s: compaction block %d: %w; retry the request", modelID, i, err)
			}
			if summary != "" {
				resp.Compaction = &model.CompactionBlock{Summary: summary, Raw: raw, Usage: a.compactUsage}
			}
		}
	}
	resp.Text = text.String()
	return resp, nil
}
