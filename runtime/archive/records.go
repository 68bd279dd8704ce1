package archive

import (
	"encoding/json"
	"time"

	"github.com/gorap/gorap/rap"
)

// Format is the value of the header's "format" field.
const Format = "gorap-session-archive"

// Version is the version of the format this package writes, and the
// highest it reads.
const Version = 1

// MaxTitleChars is the most characters (Unicode code points) a session's
// title may have, as the client API allows (api.MaxTitleChars).
const MaxTitleChars = 200

// Header is the first line of an archive.
type Header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Created is when the archive was written.
	Created time.Time `json:"created"`
	// Generator names the program that wrote it, such as "gorap v0.9.0".
	Generator string `json:"generator,omitempty"`
}

// Session is one session as an archive holds it: its root thread, its
// child threads, and every record the runtime keeps of them. Each slice
// is in the order a store returns it; Messages are each thread's own
// (not the part it inherits from its parent), in Seq order.
type Session struct {
	Root          string         `json:"root"`
	Threads       []Thread       `json:"-"`
	Messages      []Message      `json:"-"`
	Inbox         []InboxItem    `json:"-"`
	Calls         []Call         `json:"-"`
	Subscriptions []Subscription `json:"-"`
	Views         []View         `json:"-"`
	Timers        []Timer        `json:"-"`
	Toolsets      []Toolset      `json:"-"`
	Trust         []Trust        `json:"-"`
	Choices       []Choice       `json:"-"`
	HeldEvents    []HeldEvent    `json:"-"`
	CallChecks    []CallCheck    `json:"-"`
	SeenKeys      []SeenKey      `json:"-"`
	Compactions   []Compaction   `json:"-"`
}

// Records counts the records of s, as its session_end line does.
func (s *Session) Records() int {
	return len(s.Threads) + len(s.Messages) + len(s.Inbox) + len(s.Calls) + len(s.Subscriptions) +
		len(s.Views) + len(s.Timers) + len(s.Toolsets) + len(s.Trust) + len(s.Choices) +
		len(s.HeldEvents) + len(s.CallChecks) + len(s.SeenKeys) + len(s.Compactions)
}

// Thread is one thread of the session.
type Thread struct {
	ID           string          `json:"id"`
	ParentID     string          `json:"parent_id,omitempty"`
	Status       string          `json:"status"`
	Created      time.Time       `json:"created"`
	OriginCallID string          `json:"origin_call_id,omitempty"`
	OriginTool   string          `json:"origin_tool,omitempty"`
	OriginArgs   json.RawMessage `json:"origin_args,omitempty"`
	InheritSeq   int64           `json:"inherit_seq,omitempty"`
	UserID       string          `json:"user_id,omitempty"`
	// Title is the title a person gave the session, on its root thread.
	// Optional: archives written before titles have none, and a session
	// without one derives its title from its first user message.
	Title string `json:"title,omitempty"`
	// Archived says that the session is archived, on its root thread.
	// Optional, as Title.
	Archived bool `json:"archived,omitempty"`
}

// Message is one entry of a thread's own history.
type Message struct {
	Thread      string       `json:"thread"`
	Seq         int64        `json:"seq"`
	Role        string       `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
	Created     time.Time    `json:"created"`
	// Usage is the token count of the completion that produced an
	// assistant message, when its provider reported one.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is one completion's token count.
type Usage struct {
	InputTokens           int64  `json:"input_tokens"`
	CachedInputTokens     int64  `json:"cached_input_tokens,omitempty"`
	CacheWriteInputTokens int64  `json:"cache_write_input_tokens,omitempty"`
	OutputTokens          int64  `json:"output_tokens"`
	Model                 string `json:"model,omitempty"`
}

// ToolCall is one tool call of an assistant message.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Display   string          `json:"display,omitempty"`
}

// ToolResult is the outcome of one tool call in a tool message.
type ToolResult struct {
	CallID       string               `json:"call_id"`
	Name         string               `json:"name,omitempty"`
	Text         string               `json:"text,omitempty"`
	Content      []rap.ContentItem    `json:"content,omitempty"`
	DisplayAs    []rap.DisplaySegment `json:"display_as,omitempty"`
	IsError      bool                 `json:"is_error,omitempty"`
	Subscription bool                 `json:"subscription,omitempty"`
}

// InboxItem is a message queued for a thread and not yet taken by it.
type InboxItem struct {
	Thread   string          `json:"thread"`
	Kind     string          `json:"kind"`
	Payload  json.RawMessage `json:"payload"`
	DedupKey string          `json:"dedup_key"`
	Created  time.Time       `json:"created"`
}

// Call is a tool call of a thread, pending or ended.
type Call struct {
	Thread    string          `json:"thread"`
	CallID    string          `json:"call_id"`
	ToolName  string          `json:"tool_name"`
	Arguments json.RawMessage `json:"arguments"`
	Toolset   string          `json:"toolset"`
	Endpoint  string          `json:"endpoint"`
	TurnSeq   int64           `json:"turn_seq"`
	State     string          `json:"state"`
	Deadline  time.Time       `json:"deadline,omitzero"`
	Created   time.Time       `json:"created"`
	Updated   time.Time       `json:"updated"`
}

// Subscription is a call whose result confirmed a subscription.
type Subscription struct {
	Thread   string    `json:"thread"`
	CallID   string    `json:"call_id"`
	ToolName string    `json:"tool_name"`
	State    string    `json:"state"`
	Created  time.Time `json:"created"`
}

// View is the latest content of one named view of a thread.
type View struct {
	Thread   string          `json:"thread"`
	ViewType string          `json:"view_type"`
	Content  json.RawMessage `json:"content"`
	Updated  time.Time       `json:"updated"`
}

// Timer is a durable wake-up of a thread (a sleep, a retry).
type Timer struct {
	ID      string          `json:"id"`
	Thread  string          `json:"thread"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Due     time.Time       `json:"due"`
	Created time.Time       `json:"created"`
}

// Toolset is a toolset document the session fetched and keeps using.
type Toolset struct {
	BaseURL  string          `json:"base_url"`
	Manifest json.RawMessage `json:"manifest"`
	Fetched  time.Time       `json:"fetched"`
}

// Trust is the digest of a tool server's discovery document the session
// trusted on first use.
type Trust struct {
	BaseURL string `json:"base_url"`
	SHA256  string `json:"sha256"`
}

// Choice is a user choice a tool asked for and nobody answered yet.
// ResponseURL may carry a key.
type Choice struct {
	Thread      string    `json:"thread"`
	CallID      string    `json:"call_id"`
	ToolName    string    `json:"tool_name"`
	Prompt      string    `json:"prompt"`
	Choices     []string  `json:"choices"`
	Default     int       `json:"default"`
	ResponseURL string    `json:"response_url"`
	Created     time.Time `json:"created"`
	// Fields, when set, make it a user input (the user_input gorap
	// extension): the JSON array of its form's fields.
	Fields json.RawMessage `json:"fields,omitempty"`
}

// HeldEvent is a subscription event that arrived before its subscription
// was confirmed.
type HeldEvent struct {
	Thread  string          `json:"thread"`
	CallID  string          `json:"call_id"`
	Payload json.RawMessage `json:"payload"`
	Created time.Time       `json:"created"`
}

// CallCheck is a scheduled question to a tool server about one call.
type CallCheck struct {
	Thread   string    `json:"thread"`
	CallID   string    `json:"call_id"`
	Due      time.Time `json:"due"`
	Failures int       `json:"failures,omitempty"`
}

// SeenKey is the id of a message a thread already received (a
// subscription event's, an Idempotency-Key), kept so that it is not taken
// twice.
type SeenKey struct {
	Thread string `json:"thread"`
	Key    string `json:"key"`
}

// Compaction replaces, in the model's view of a thread, its history up to
// UpToSeq with Summary. Block, for a compaction the model's API made
// itself, is its block as the API sent it (base64 in the archive, so its
// bytes come back unchanged); absent for gorap's own compactions and in
// archives written before it existed.
type Compaction struct {
	Thread   string    `json:"thread"`
	UpToSeq  int64     `json:"upto_seq"`
	Summary  string    `json:"summary"`
	Messages int       `json:"messages"`
	Usage    *Usage    `json:"usage,omitempty"`
	Block    []byte    `json:"block,omitempty"`
	Created  time.Time `json:"created"`
}
