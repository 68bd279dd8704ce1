// Package api holds the types of gorap's client API (/v1, see docs/api.md):
// the bodies of its requests and answers and the payloads of its events.
// The runtime serves them and the Go client (runtime/client) reads them, so
// both agree by construction. It does not depend on how the runtime stores
// its records (runtime/store): the runtime converts them into these types.
package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gorap/gorap/rap"
)

// Event types of GET /v1/threads/{id}/events (see docs/api.md).
const (
	// EventTextDelta: TextDelta — a piece of assistant text as it streams.
	EventTextDelta = "text_delta"
	// EventMessage: Message — a message added to the history.
	EventMessage = "message"
	// EventToolCall: ToolCallEvent — the assistant called a tool.
	EventToolCall = "tool_call"
	// EventToolResult: ToolResultEvent — a result was added to the history.
	EventToolResult = "tool_result"
	// EventError: Error — a slice failed.
	EventError = "error"
	// EventUsage: Usage — the tokens of one completion, as the provider
	// reported them; cached ones were read from its prompt cache.
	EventUsage = "usage"
	// EventCompacted: Compaction — the thread's older history is now
	// summarised in what the model sees (the history keeps every message).
	EventCompacted = "compacted"
	// EventStatus: Status — the thread started or finished processing.
	// "idle" also comes while calls are pending: see EventTurnEnded to
	// know where the thread stands.
	EventStatus = "status"
	// EventTurnEnded: TurnEnded — a turn of the thread, or of one of its
	// descendants, ended; it says the thread's state now (quiet when
	// nothing more happens without a new message).
	EventTurnEnded = "turn_ended"
	// EventView: View — a tool updated a view (RAP VU-2).
	EventView = "view"
	// EventToolsets: Toolsets — the session's toolsets.
	EventToolsets = "toolsets"
	// EventOAuth: OAuth — show the link to the user (RAP OA-1); the call
	// stays pending.
	EventOAuth = "oauth"
	// EventUserChoice: UserChoice (RAP UC-1) — show the prompt and answer
	// with POST /v1/threads/{id}/choices/{call_id}. The call stays pending.
	EventUserChoice = "user_choice"
	// EventChoiceAnswered: ChoiceAnswered — a choice was answered (by any
	// client).
	EventChoiceAnswered = "choice_answered"
	// EventUserInput: UserInput (the user_input gorap extension) — show
	// the form and answer with POST /v1/threads/{id}/inputs/{call_id}.
	// The call stays pending.
	EventUserInput = "user_input"
	// EventInputAnswered: InputAnswered — a user input was answered or
	// dismissed (by any client).
	EventInputAnswered = "input_answered"
	// EventThreadSpawned: ThreadSpawned, on the parent — a child thread
	// started, for spawn_thread (reason "spawn_thread") or for a
	// subscription event (reason "subscription_event", RAP SU-6). Open the
	// child's own event stream to follow it.
	EventThreadSpawned = "thread_spawned"
	// EventThreadClosed: ThreadClosed, on the closed thread and on its
	// parent.
	EventThreadClosed = "thread_closed"
	// EventThreadUpdated: Thread, on a session's root thread — its
	// title or archived flag changed (PATCH /v1/threads/{id}, or the
	// first user message gave it a title); the payload is the root thread
	// as GET /v1/threads lists it.
	EventThreadUpdated = "thread_updated"
	// EventThread: ThreadInfo — the thread's state, as GET
	// /v1/threads/{id} answers it; in a replay, before the history.
	EventThread = "thread"
	// EventReset: Reset — the client's Last-Event-ID could not be resumed
	// (the runtime restarted, or the events after it are no longer kept):
	// discard what was shown for this thread, a full replay follows.
	EventReset = "reset"
	// EventReplayDone: ReplayDone — the end of the replayed state (or of
	// the missed events, on a resume); every later event is live.
	EventReplayDone = "replay_done"
)

// Modes of ReplayDone.
const (
	// ReplayFull ends the replay of a first connect.
	ReplayFull = "replay"
	// ReplayResume ends the events a resuming client missed.
	ReplayResume = "resume"
	// ReplayReset ends the replay that followed a reset.
	ReplayReset = "reset"
)

// LastEventIDParam is the query parameter that may carry the Last-Event-ID
// of GET /v1/threads/{id}/events, for clients that cannot set the header.
const LastEventIDParam = "last_event_id"

// TextDelta is the payload of EventTextDelta.
type TextDelta struct {
	Text string `json:"text"`
}

// ToolCallEvent is the payload of EventToolCall.
type ToolCallEvent struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Display is the call rendered for people (the tool's display script,
	// or name(arguments)).
	Display string `json:"display"`
}

// ToolResultEvent is the payload of EventToolResult.
type ToolResultEvent struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Text   string `json:"text"`
	// Content, when present, is what the model received instead of Text
	// (RAP RE-2).
	Content []rap.ContentItem `json:"content"`
	// DisplayAs are the segments for people (RAP RE-3), as the tool sent
	// them.
	DisplayAs []rap.DisplaySegment `json:"display_as"`
	IsError   bool                 `json:"is_error"`
}

// Error is the payload of EventError. A model failure also has Attempt
// and MaxAttempts, and RetryInMS (the runtime retries on its own) or Final
// (it gave up; the next message retries).
type Error struct {
	Message     string `json:"message"`
	Attempt     int    `json:"attempt,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	RetryInMS   int64  `json:"retry_in_ms,omitempty"`
	Final       bool   `json:"final,omitempty"`
}

// Usage is the payload of EventUsage, and the totals of ThreadInfo.
type Usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	UncachedInputTokens   int64 `json:"uncached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens"`
	OutputTokens          int64 `json:"output_tokens"`
}

// States of Status.
const (
	StateRunning = "running"
	StateIdle    = "idle"
)

// Status is the payload of EventStatus.
type Status struct {
	// State is StateRunning or StateIdle.
	State string `json:"state"`
}

// View is the payload of EventView (RAP VU-1): Content is the tool's
// object, uninterpreted.
type View struct {
	ViewType string          `json:"view_type"`
	Content  json.RawMessage `json:"content"`
}

// Toolsets is the payload of EventToolsets and part of the answer to
// POST /v1/threads.
type Toolsets struct {
	// Loaded names the toolsets whose tools the model may use.
	Loaded []string `json:"loaded"`
	// Errors are the discovery problems, for people.
	Errors []string `json:"errors"`
}

// OAuth is the payload of EventOAuth.
type OAuth struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	AuthURL string `json:"auth_url"`
}

// UserChoice is the payload of EventUserChoice.
type UserChoice struct {
	CallID  string   `json:"call_id"`
	Name    string   `json:"name"`
	Prompt  string   `json:"prompt"`
	Choices []string `json:"choices"`
	Default int      `json:"default"`
}

// ChoiceAnswered is the payload of EventChoiceAnswered.
type ChoiceAnswered struct {
	CallID    string `json:"call_id"`
	Selected  int    `json:"selected"`
	Dismissed bool   `json:"dismissed"`
}

// Reasons of ThreadSpawned.
const (
	SpawnThread       = "spawn_thread"
	SubscriptionEvent = "subscription_event"
)

// ThreadSpawned is the payload of EventThreadSpawned.
type ThreadSpawned struct {
	ThreadID     string `json:"thread_id"`
	ParentID     string `json:"parent_id"`
	OriginCallID string `json:"origin_call_id"`
	OriginTool   string `json:"origin_tool"`
	// Reason is SpawnThread or SubscriptionEvent.
	Reason string `json:"reason"`
}

// ThreadClosed is the payload of EventThreadClosed.
type ThreadClosed struct {
	ThreadID string `json:"thread_id"`
}

// Reset is the payload of EventReset.
type Reset struct {
	// Reason says why the Last-Event-ID could not be resumed.
	Reason string `json:"reason"`
}

// ReplayDone is the payload of EventReplayDone.
type ReplayDone struct {
	// Mode is ReplayFull, ReplayResume or ReplayReset.
	Mode string `json:"mode"`
	// LastSeq is the Seq of the last history message replayed (not set on
	// a resume).
	LastSeq int64 `json:"last_seq,omitempty"`
}

// DecodeEvent decodes the payload of an event of type typ: a pointer to
// the type its Event* constant names (*Message for EventMessage). An
// unknown type decodes to json.RawMessage, so that a client keeps working
// with a newer runtime.
func DecodeEvent(typ string, data []byte) (any, error) {
	var v any
	switch typ {
	case EventTextDelta:
		v = new(TextDelta)
	case EventMessage:
		v = new(Message)
	case EventToolCall:
		v = new(ToolCallEvent)
	case EventToolResult:
		v = new(ToolResultEvent)
	case EventError:
		v = new(Error)
	case EventUsage:
		v = new(Usage)
	case EventCompacted:
		v = new(Compaction)
	case EventStatus:
		v = new(Status)
	case EventTurnEnded:
		v = new(TurnEnded)
	case EventView:
		v = new(View)
	case EventToolsets:
		v = new(Toolsets)
	case EventOAuth:
		v = new(OAuth)
	case EventUserChoice:
		v = new(UserChoice)
	case EventChoiceAnswered:
		v = new(ChoiceAnswered)
	case EventUserInput:
		v = new(UserInput)
	case EventInputAnswered:
		v = new(InputAnswered)
	case EventThreadSpawned:
		v = new(ThreadSpawned)
	case EventThreadClosed:
		v = new(ThreadClosed)
	case EventThreadUpdated:
		v = new(Thread)
	case EventThread:
		v = new(ThreadInfo)
	case EventReset:
		v = new(Reset)
	case EventReplayDone:
		v = new(ReplayDone)
	default:
		return json.RawMessage(data), nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decode %s event: %w", typ, err)
	}
	return v, nil
}

// Compaction is the payload of EventCompacted, and one compaction of a
// thread's history in HistoryResponse: from then on the model sees Summary
// instead of the thread's messages up to UpToSeq.
type Compaction struct {
	// UpToSeq is the Seq of the last message the summary covers.
	UpToSeq int64 `json:"upto_seq"`
	// Messages is how many messages the summary covers.
	Messages int `json:"messages"`
	// Summary is the text the model sees instead of them.
	Summary string    `json:"summary"`
	Created time.Time `json:"created"`
}
