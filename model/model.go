// Package model defines the one interface through which the runtime talks to
// a language model, and the provider-neutral conversation types it uses.
// Each provider (anthropic, openai, scripted) is a package that implements
// Provider.
package model

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
)

// Role is who produced a message.
type Role string

// Roles of conversation messages.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one entry of a conversation as the model sees it. A user
// message carries Text and/or ToolResults; an assistant message carries Text
// and/or ToolCalls.
type Message struct {
	Role        Role         `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult answers one ToolCall. Content, when present, is the multimodal
// form (text and images); Text is used otherwise.
type ToolResult struct {
	CallID  string        `json:"call_id"`
	Text    string        `json:"text,omitempty"`
	Content []ContentPart `json:"content,omitempty"`
	IsError bool          `json:"is_error,omitempty"`
}

// Parts is the result's content as parts: Content when it has any,
// otherwise one text part holding Text.
func (r ToolResult) Parts() []ContentPart {
	if len(r.Content) > 0 {
		return r.Content
	}
	return []ContentPart{{Type: "text", Text: r.Text}}
}

// PlainText is the result's text: its text parts joined by newlines, or
// Text when it has no Content. Images are left out.
func (r ToolResult) PlainText() string {
	if len(r.Content) == 0 {
		return r.Text
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// same reports whether r and o are one result delivered twice: the same
// call id, error flag, text and content.
func (r ToolResult) same(o ToolResult) bool {
	return r.CallID == o.CallID && r.Text == o.Text && r.IsError == o.IsError && slices.Equal(r.Content, o.Content)
}

// ContentPart is a text or image part of a tool result. Data is base64.
type ContentPart struct {
	Type      string `json:"type"` // "text" or "image"
	Text      string `json:"text,omitempty"`
	Data      string `json:"data,omitempty"`
	MediaType string `json:"media_type,omitempty"`
}

// ToolSpec is a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one completion request.
type Request struct {
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
	// Settled is how many leading Messages will be sent unchanged in every
	// later request of the same conversation, and SettledSeq the caller's
	// sequence number of the last stored message they cover. With Wire,
	// a provider encodes those messages once and marks
	// them as the stable prefix for the API's prompt caching.
	Settled    int
	SettledSeq int64
	// Wire, when set, is the conversation's cache of encoded settled
	// messages (see WireCache); nil means every message is encoded anew.
	Wire *WireCache
	// CompactAt, when positive, asks a provider whose API compacts on its
	// side (ServerCompactor) to have it summarise the conversation once
	// the request's input passes CompactAt tokens; the response then
	// carries the compaction (Response.Compaction). Other providers
	// ignore it.
	CompactAt int
	// Compaction, when set, is the Raw block of an earlier compaction by
	// the provider's API (Response.Compaction) that stands for the
	// conversation before Messages: a ServerCompactor sends it first, byte
	// for byte, where its API wants it. It goes only to the provider that
	// made it, with CompactAt set.
	Compaction []byte
}

// Response is a finished completion: the assistant's turn.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	StopReason string
	// Usage is the token count the API reported, zero when it reported
	// none.
	Usage Usage
	// Compaction is the compaction the provider's API made before it
	// answered (Request.CompactAt), nil when it made none.
	Compaction *CompactionBlock
}

// Usage counts a completion's tokens. InputTokens is every input token;
// CachedInputTokens of them were read from the provider's prompt cache
// and CacheWriteInputTokens were written to it (Anthropic only), so
// InputTokens − CachedInputTokens − CacheWriteInputTokens were processed
// without the cache.
type Usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens,omitempty"`
	OutputTokens          int64 `json:"output_tokens"`
}

// UncachedInputTokens is the input tokens not read from the cache.
func (u Usage) UncachedInputTokens() int64 { return u.InputTokens - u.CachedInputTokens }

// Stream receives a completion's output as it is produced. Deltas are for
// display only: the runtime persists the Response, never a half stream.
type Stream interface {
	// TextDelta is called with each piece of assistant text.
	TextDelta(text string)
}

// Provider runs completions against one model.
type Provider interface {
	// Name identifies the provider and model, such as "anthropic:claude-sonnet-4-5"
	// or "scripted:demo.json (scripted test model)".
	Name() string
	// SupportsImages reports whether tool results may carry image bytes
	// (RAP RE-2: otherwise each image becomes a text placeholder).
	SupportsImages() bool
	// Complete runs one completion, calling s (which may be nil) with text
	// deltas as they stream. Like io.Writer's Write with its buffer,
	// Complete must not modify req nor keep any part of it after it
	// returns: the runtime reuses the array of req.Messages.
	Complete(ctx context.Context, req Request, s Stream) (*Response, error)
}

// ActivityStream is a Stream that also wants to hear of every event the
// provider receives from the model's API (text, tool-call pieces,
// keep-alive pings), so that its caller can tell a slow answer that is
// still streaming from a connection that hung. Providers report events
// with Activity.
type ActivityStream interface {
	Stream
	// Activity is called for each event received, before its content is
	// processed.
	Activity()
}

// Activity tells s that an event arrived, if s is an ActivityStream.
// Providers call it once per event received.
func Activity(s Stream) {
	if a, ok := s.(ActivityStream); ok {
		a.Activity()
	}
}
