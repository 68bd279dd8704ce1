package api

// This file holds the records the client API shows: threads, history
// messages with their tool calls and results, pending calls,
// subscriptions and user choices. They are the API's own types: the
// runtime converts its stored records into them, so a change to how the
// runtime stores a record changes neither the /v1 JSON nor the Go client.

import (
	"encoding/json"
	"time"

	"github.com/gorap/gorap/rap"
)

// ThreadStatus is the lifecycle state of a thread.
type ThreadStatus string

// Statuses of a Thread.
const (
	// ThreadStatusActive: the thread takes messages.
	ThreadStatusActive ThreadStatus = "active"
	// ThreadStatusClosed: the thread was closed; it takes no more messages.
	ThreadStatusClosed ThreadStatus = "closed"
)

// Thread is one thread, as GET /v1/threads lists it. A root thread
// (ParentID empty) is a session; child threads form a tree under it.
type Thread struct {
	ID string `json:"id"`
	// ParentID is the parent thread's id, empty for a root thread.
	ParentID string `json:"parent_id,omitempty"`
	// RootID is the id of the session's root thread (the thread's own id
	// for a root thread).
	RootID string `json:"root_id"`
	// Status is ThreadStatusActive or ThreadStatusClosed.
	Status  ThreadStatus `json:"status"`
	Created time.Time    `json:"created"`
	// OriginCallID is the call a child thread was made for: the parent's
	// spawn_thread call, or the subscribing call whose event it handles.
	OriginCallID string `json:"origin_call_id,omitempty"`
	// OriginTool is the tool name of OriginCallID.
	OriginTool string `json:"origin_tool,omitempty"`
	// OriginArgs are the arguments of OriginCallID.
	OriginArgs json.RawMessage `json:"origin_args,omitempty"`
	// InheritSeq, for a child thread, is how much of its parent's history
	// it inherits: its history starts with the parent's messages up to
	// this Seq (with the parent's ThreadID), then its own, whose Seqs
	// continue from it.
	InheritSeq int64 `json:"inherit_seq,omitempty"`
	// UserID is the end user of the session, sent to tools as user_id
	// (RAP IN-1); empty when unknown. Child threads have their root's.
	UserID string `json:"user_id,omitempty"`
	// Title, on a root thread, is the session's title: the one a person
	// gave it (PATCH /v1/threads/{id}), or else one derived from its
	// first user message (its first line, cut at about 60 characters on a
	// word boundary); empty until there is either. Child threads have
	// none.
	Title string `json:"title,omitempty"`
	// Archived, on a root thread, says the session is archived: GET
	// /v1/threads leaves its threads out unless asked for them
	// (archived=include or only).
	Archived bool `json:"archived,omitempty"`
}

// Role says who produced a history message.
type Role string

// Roles of a Message. Tool results come in their own messages (RoleTool),
// where they arrived in the history.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one tool call of an assistant message.
type ToolCall struct {
	// ID is the call id, unique in the thread.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments are the JSON arguments the model gave.
	Arguments json.RawMessage `json:"arguments"`
	// Display is the call rendered for people (the tool's display script,
	// or a default).
	Display string `json:"display,omitempty"`
}

// ToolResult is one tool result of a tool message.
type ToolResult struct {
	// CallID is the ToolCall.ID this result answers.
	CallID string `json:"call_id"`
	// Name is the tool's name, so that a result reads on its own.
	Name string `json:"name,omitempty"`
	Text string `json:"text,omitempty"`
	// Content, when present, is what the model received instead of Text
	// (RAP RE-2).
	Content []rap.ContentItem `json:"content,omitempty"`
	// DisplayAs are the segments for people (RAP RE-3), as the tool sent
	// them.
	DisplayAs []rap.DisplaySegment `json:"display_as,omitempty"`
	IsError   bool                 `json:"is_error,omitempty"`
	// Subscription marks a result that confirmed a subscription (RAP
	// SU-1).
	Subscription bool `json:"subscription,omitempty"`
}

// Message is one message of a thread's history, and the payload of
// EventMessage.
type Message struct {
	// ThreadID is the thread that saved the message: an ancestor's id for
	// a message a child thread inherited (see Thread.InheritSeq).
	ThreadID string `json:"thread_id"`
	// Seq orders the messages of a history, starting at 1.
	Seq  int64  `json:"seq"`
	Role Role   `json:"role"`
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls of an assistant message.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolResults are the results of a tool message.
	ToolResults []ToolResult `json:"tool_results,omitempty"`
	Created     time.Time    `json:"created"`
}

// CallState is the state of a tool call. ThreadInfo lists only pending
// calls: CallNew or CallDispatched.
type CallState string

// States of a Call.
const (
	// CallNew: saved with its turn, not yet accepted by the tool.
	CallNew CallState = "new"
	// CallDispatched: the tool accepted the invocation; its result has not
	// arrived.
	CallDispatched CallState = "dispatched"
	// CallDone: its result arrived (or was made up: a timeout, a failed
	// dispatch).
	CallDone CallState = "done"
	// CallCancelled: the runtime gave up on it (RAP CA-2).
	CallCancelled CallState = "cancelled"
)

// Call is a tool call waiting for its result.
type Call struct {
	ThreadID  string          `json:"thread_id"`
	CallID    string          `json:"call_id"`
	ToolName  string          `json:"tool_name"`
	Arguments json.RawMessage `json:"arguments"`
	// Toolset is the name of the toolset the tool belongs to.
	Toolset string `json:"toolset"`
	// Endpoint is the URL the invocation is sent to.
	Endpoint string `json:"endpoint"`
	// TurnSeq is the Seq of the assistant message that made the call.
	TurnSeq int64     `json:"turn_seq"`
	State   CallState `json:"state"`
	// Deadline, when not zero, is when the runtime gives up waiting and
	// adds a timeout result (RAP RT-5); absent from the JSON when zero.
	Deadline time.Time `json:"deadline,omitzero"`
	Created  time.Time `json:"created"`
	// Updated is when the call last changed state.
	Updated time.Time `json:"updated"`
}

// SubscriptionState is the state of a subscription.
type SubscriptionState string

// States of a Subscription.
const (
	// SubscriptionActive: the tool may still send events.
	SubscriptionActive SubscriptionState = "active"
	// SubscriptionFinal: the tool sent its final event.
	SubscriptionFinal SubscriptionState = "final"
	// SubscriptionCancelled: the subscription was cancelled.
	SubscriptionCancelled SubscriptionState = "cancelled"
)

// Subscription is a thread's subscription: a call whose result confirmed
// a subscription (RAP SU-3).
type Subscription struct {
	ThreadID string `json:"thread_id"`
	// CallID is the subscribing call.
	CallID   string            `json:"call_id"`
	ToolName string            `json:"tool_name"`
	State    SubscriptionState `json:"state"`
	Created  time.Time         `json:"created"`
}

// Choice is a user choice waiting for an answer (RAP UC-1): answer it
// with POST /v1/threads/{id}/choices/{call_id}.
type Choice struct {
	ThreadID string `json:"thread_id"`
	// CallID is the call that asked.
	CallID   string `json:"call_id"`
	ToolName string `json:"tool_name"`
	// Prompt is the question, for people.
	Prompt string `json:"prompt"`
	// Choices are the options; an answer selects one by its index.
	Choices []string `json:"choices"`
	// Default is the index sent when the choice is dismissed.
	Default int       `json:"default"`
	Created time.Time `json:"created"`
}
