package wiretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gorap/gorap/model"
)

// anthropicWire speaks the Messages API.
type anthropicWire struct{}

func (anthropicWire) path() string { return "/v1/messages" }

func (anthropicWire) breakpoints(body []byte) []Breakpoint { return antBreakpoints(body) }

// Request shapes of the Messages API, as far as this server checks them.
type (
	antRequest struct {
		Model             string          `json:"model"`
		MaxTokens         int             `json:"max_tokens"`
		System            json.RawMessage `json:"system"`
		Messages          []antMessage    `json:"messages"`
		Tools             []antTool       `json:"tools"`
		Stream            bool            `json:"stream"`
		ContextManagement json.RawMessage `json:"context_management"`
	}
	antMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	antBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
		Source    *struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	antTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

// blocks decodes a content member: a string or an array of blocks.
func antBlocks(raw json.RawMessage, where string) ([]antBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return nil, fmt.Errorf("%s: content is required", where)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		return []antBlock{{Type: "text", Text: &s}}, nil
	}
	var bs []antBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("%s: content must be a string or an array of blocks: %v", where, err)
	}
	return bs, nil
}

func (anthropicWire) decode(body []byte, req *Request) error {
	var ar antRequest
	if err := json.Unmarshal(body, &ar); err != nil {
		return fmt.Errorf("request body is not valid JSON: %v", err)
	}
	req.Model, req.MaxTokens, req.Stream = ar.Model, ar.MaxTokens, ar.Stream
	if ar.Model == "" {
		return errors.New("model: Field required")
	}
	if cm := bytes.TrimSpace(ar.ContextManagement); len(cm) > 0 && cm[0] != 'n' {
		if err := antContextManagement(cm, req.Header); err != nil {
			return err
		}
		req.ContextManagement = cm
	}
	if ar.MaxTokens <= 0 {
		return errors.New("max_tokens: must be a positive integer")
	}
	if len(ar.Messages) == 0 {
		return errors.New("messages: at least one message is required")
	}
	if sys := bytes.TrimSpace(ar.System); len(sys) > 0 && sys[0] != 'n' {
		bs, err := antBlocks(sys, "system")
		if err != nil {
			return err
		}
		var parts []string
		for _, b := range bs {
			if b.Type != "text" || b.Text == nil {
				return fmt.Errorf("system: blocks must be text, not %q", b.Type)
			}
			parts = append(parts, *b.Text)
		}
		req.System = strings.Join(parts, "\n")
	}
	names := map[string]bool{}
	for i, t := range ar.Tools {
		if t.Name == "" {
			return fmt.Errorf("tools.%d.name: Field required", i)
		}
		if names[t.Name] {
			return fmt.Errorf("tools: Tool names must be unique (%s)", t.Name)
		}
		names[t.Name] = true
		var schema struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema.Type != "object" {
			return fmt.Errorf("tools.%d.input_schema.type: Input should be 'object'", i)
		}
		req.Tools = append(req.Tools, model.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}

	// Consecutive messages of one role form one turn, as in the real API.
	type turn struct {
		role   string
		first  int
		blocks []antBlock
	}
	var turns []turn
	for i, m := range ar.Messages {
		where := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("%s.role: Input should be 'user' or 'assistant'", where)
		}
		bs, err := antBlocks(m.Content, where)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			return fmt.Errorf("%s: all messages must have non-empty content", where)
		}
		msg := model.Message{Role: model.Role(m.Role)}
		for j, b := range bs {
			bw := fmt.Sprintf("%s.content.%d", where, j)
			switch b.Type {
			case "compaction":
				if m.Role != "assistant" {
					return fmt.Errorf("%s: compaction blocks belong in assistant messages", bw)
				}
				if !hasBeta(req.Header, CompactionBeta) {
					return fmt.Errorf("%s: a compaction block needs the beta header anthropic-beta: %s", bw, CompactionBeta)
				}
				raw, err := rawBlock(m.Content, j)
				if err != nil {
					return fmt.Errorf("%s: %v", bw, err)
				}
				req.CompactionBlocks = append(req.CompactionBlocks, raw)
			case "text":
				if b.Text == nil || *b.Text == "" {
					return fmt.Errorf("%s: text content blocks must be non-empty", bw)
				}
				msg.Text += *b.Text
			case "image":
				if b.Source == nil || b.Source.Type != "base64" || b.Source.Data == "" || b.Source.MediaType == "" {
					return fmt.Errorf("%s.source: an image needs type base64, media_type and data", bw)
				}
			case "tool_use":
				if m.Role != "assistant" {
					return fmt.Errorf("%s: tool_use blocks belong in assistant messages", bw)
				}
				if b.ID == "" || b.Name == "" || !isObject(b.Input) {
					return fmt.Errorf("%s: tool_use needs id, name and an object input", bw)
				}
				msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
			case "tool_result":
				if m.Role != "user" {
					return fmt.Errorf("%s: tool_result blocks belong in user messages", bw)
				}
				r, err := antResult(b, bw)
				if err != nil {
					return err
				}
				msg.ToolResults = append(msg.ToolResults, r)
			default:
				return fmt.Errorf("%s.type: unsupported block type %q", bw, b.Type)
			}
		}
		req.Messages = append(req.Messages, msg)
		if n := len(turns); n > 0 && turns[n-1].role == m.Role {
			turns[n-1].blocks = append(turns[n-1].blocks, bs...)
		} else {
			turns = append(turns, turn{role: m.Role, first: i, blocks: bs})
		}
	}

	// Every tool_use is answered by a tool_result in the very next turn,
	// and every tool_result answers a tool_use of the turn before it.
	for k, t := range turns {
		var open []string
		if k > 0 && turns[k-1].role == "assistant" {
			for _, b := range turns[k-1].blocks {
				if b.Type == "tool_use" {
					open = append(open, b.ID)
				}
			}
		}
		answered := map[string]bool{}
		seenOther := false
		for _, b := range t.blocks {
			if b.Type != "tool_result" {
				seenOther = true
				continue
			}
			if seenOther {
				return fmt.Errorf("messages.%d: tool_result blocks must come before any other content in the message", t.first)
			}
			if !slices.Contains(open, b.ToolUseID) {
				return fmt.Errorf("messages.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", t.first, b.ToolUseID)
			}
			answered[b.ToolUseID] = true
		}
		var missing []string
		for _, id := range open {
			if !answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", turns[k-1].first, strings.Join(missing, ", "))
		}
	}
	if last := turns[len(turns)-1]; last.role == "assistant" {
		for _, b := range last.blocks {
			if b.Type == "tool_use" {
				return fmt.Errorf("messages.%d: the conversation ends with tool_use %s and no tool_result", last.first, b.ID)
			}
		}
	}
	return nil
}

// CompactionBeta is the anthropic-beta header value of server-side
// compaction, which a request needs for a context_management edit of
// type compact_20260112 or a compaction block.
const CompactionBeta = "compact-2026-01-12"

// minCompactionTrigger is the fewest input tokens the API takes as a
// compaction trigger.
const minCompactionTrigger = 50_000

// hasBeta reports whether the request's anthropic-beta headers name beta.
func hasBeta(h http.Header, beta string) bool {
	for _, v := range h.Values("anthropic-beta") {
		for _, b := range strings.Split(v, ",") {
			if strings.TrimSpace(b) == beta {
				return true
			}
		}
	}
	return false
}

// antContextManagement checks a context_management member: its edits of
// type compact_20260112 need the beta header and a trigger of at least
// minCompactionTrigger input tokens.
func antContextManagement(raw json.RawMessage, h http.Header) error {
	var cm struct {
		Edits []struct {
			Type    string `json:"type"`
			Trigger *struct {
				Type  string `json:"type"`
				Value int    `json:"value"`
			} `json:"trigger"`
		} `json:"edits"`
	}
	if err := json.Unmarshal(raw, &cm); err != nil {
		return fmt.Errorf("context_management: %v", err)
	}
	for i, e := range cm.Edits {
		if e.Type != "compact_20260112" {
			continue
		}
		if !hasBeta(h, CompactionBeta) {
			return fmt.Errorf("context_management.edits.%d: compact_20260112 needs the beta header anthropic-beta: %s", i, CompactionBeta)
		}
		if t := e.Trigger; t != nil && (t.Type != "input_tokens" || t.Value < minCompactionTrigger) {
			return fmt.Errorf("context_management.edits.%d.trigger: want input_tokens of at least %d, not %s %d", i, minCompactionTrigger, t.Type, t.Value)
		}
	}
	return nil
}

// rawBlock returns block j of a content array as it is in the body.
func rawBlock(content json.RawMessage, j int) ([]byte, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(content, &raws); err != nil || j >= len(raws) {
		return nil, fmt.Errorf("content is not an array of blocks")
	}
	return raws[j], nil
}

func antResult(b antBlock, where string) (model.ToolResult, error) {
	r := model.ToolResult{CallID: b.ToolUseID, IsError: b.IsError}
	if b.ToolUseID == "" {
		return r, fmt.Errorf("%s.tool_use_id: Field required", where)
	}
	c := bytes.TrimSpace(b.Content)
	if len(c) == 0 || c[0] == 'n' {
		return r, nil
	}
	if c[0] == '"' {
		err := json.Unmarshal(c, &r.Text)
		return r, err
	}
	var items []antBlock
	if err := json.Unmarshal(c, &items); err != nil {
		return r, fmt.Errorf("%s.content: must be a string or an array of blocks: %v", where, err)
	}
	var texts []string
	for j, it := range items {
		switch it.Type {
		case "text":
			if it.Text == nil || *it.Text == "" {
				return r, fmt.Errorf("%s.content.%d: text content blocks must be non-empty", where, j)
			}
			texts = append(texts, *it.Text)
			r.Content = append(r.Content, model.ContentPart{Type: "text", Text: *it.Text})
		case "image":
			if it.Source == nil || it.Source.Type != "base64" || it.Source.Data == "" {
				return r, fmt.Errorf("%s.content.%d.source: an image needs type base64, media_type and data", where, j)
			}
			r.Content = append(r.Content, model.ContentPart{Type: "image", Data: it.Source.Data, MediaType: it.Source.MediaType})
		default:
			return r, fmt.Errorf("%s.content.%d.type: unsupported block type %q in a tool_result", where, j, it.Type)
		}
	}
	r.Text = strings.Join(texts, "\n")
	return r, nil
}

func (anthropicWire) authorize(h http.Header, key string) string {
	if h.Get("anthropic-version") == "" {
		return "anthropic-version: header is required"
	}
	if h.Get("x-api-key") != key {
		return "invalid x-api-key"
	}
	return ""
}

// antErrorType is the error type the API reports for a status.
func antErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

func (anthropicWire) writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("request-id", "req_wiretest")
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": antErrorType(status), "message": msg},
	})
}

func (anthropicWire) writeReply(w http.ResponseWriter, r *http.Request, req Request, rep Reply, seq int, stop <-chan struct{}) {
	calls := fillIDs(rep.ToolCalls, "toolu_wt", seq)
	stopReason := rep.stopReason("end_turn", "tool_use")
	msgID := fmt.Sprintf("msg_wt%d", seq)
	usage := map[string]any{"input_tokens": max(len(req.Body)-req.CacheReadBytes-req.CacheWriteBytes, 0) / 4, "output_tokens": 0,
		"cache_read_input_tokens": req.CacheReadBytes / 4, "cache_creation_input_tokens": req.CacheWriteBytes / 4}
	if !req.Stream {
		var content []any
		if c := rep.Compaction; c != nil {
			content = append(content, c.Block)
		}
		if rep.Text != "" {
			content = append(content, map[string]any{"type": "text", "text": rep.Text})
		}
		for _, c := range calls {
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Arguments})
		}
		if content == nil {
			content = []any{}
		}
		usage["output_tokens"] = len(rep.Text) / 4
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stopReason, "stop_sequence": nil, "usage": usage,
		})
		return
	}

	s := newSSE(w)
	usage["output_tokens"] = 1
	s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
	index := 0
	if c := rep.Compaction; c != nil {
		s.send("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+string(c.Block)+`}`)
		if len(c.Delta) > 0 {
			s.send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+string(c.Delta)+`}`)
		}
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		index++
	}
	if rep.Text != "" || rep.Hang || rep.StreamError != "" {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		s.send("ping", map[string]any{"type": "ping"})
		for _, piece := range chunks(rep.Text, rep.ChunkSize) {
			s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		if rep.Hang {
			hang(r, stop)
			return
		}
		if rep.StreamError != "" {
			s.send("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": rep.StreamError}})
			return
		}
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for _, c := range calls {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		for _, piece := range chunks(string(c.Arguments), rep.ChunkSize) {
			s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	final := map[string]any{"output_tokens": max(1, len(rep.Text)/4)}
	if rep.Compaction != nil {
		// The compaction's own cost, apart from the answer's.
		final["iterations"] = []map[string]any{
			{"type": "compaction", "input_tokens": len(req.Body) / 4, "output_tokens": len(rep.Compaction.Block) / 4,
				"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
			{"type": "message", "input_tokens": usage["input_tokens"], "output_tokens": final["output_tokens"],
				"cache_read_input_tokens": usage["cache_read_input_tokens"], "cache_creation_input_tokens": usage["cache_creation_input_tokens"]},
		}
	}
	s.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason, "stop_sequence": nil},
		"usage": final})
	s.send("message_stop", map[string]any{"type": "message_stop"})
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
