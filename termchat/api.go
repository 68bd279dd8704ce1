// Package termchat is gorap's terminal client: the logic of "rap chat"
// (talk to a running runtime in the terminal, interactively or from a
// script) and of "rap demo" (play a scripted conversation). The cmd/rap
// verbs only parse flags and call Run or PlayDemo.
//
// The renderer prints a thread's story in causal order: every message in
// the order the runtime saved it, a tool result before the reply it
// caused, and nothing over the input prompt. A piped session ends only
// when the thread tree is quiet: no queued input, no pending call, no
// active subscription — or when --wait expired.
package termchat

import (
	"context"
	"encoding/json"

	"github.com/gorap/gorap/runtime/api"
)

// Event is one event of a thread's stream (see docs/api.md): its type,
// such as "message" or "tool_result", and its JSON payload.
type Event struct {
	Type string
	Data json.RawMessage
}

// Created is the answer to creating a thread.
type Created struct {
	ID string `json:"id"`
	// Toolsets is what discovery loaded for the new session.
	Toolsets struct {
		Loaded []string `json:"loaded"`
		Errors []string `json:"errors"`
	} `json:"toolsets"`
}

// API is what the terminal client needs of a runtime's client API (/v1).
// NewHTTPAPI implements it over HTTP.
type API interface {
	// CreateThread starts a new session.
	CreateThread(ctx context.Context) (*Created, error)
	// PostMessage adds a user message; it returns once the runtime
	// accepted it durably.
	PostMessage(ctx context.Context, threadID, text string) error
	// History returns the thread's messages in order.
	History(ctx context.Context, threadID string) ([]api.Message, error)
	// Events opens the thread's live event stream. The channel is closed
	// when the stream ends or ctx is done; the function then says why.
	Events(ctx context.Context, threadID string) (<-chan Event, func() error, error)
	// AnswerChoice answers a user choice: selected, or a dismissal when
	// nil.
	AnswerChoice(ctx context.Context, threadID, callID string, selected *int) error
	// AnswerInput answers a user input with values, or dismisses it.
	AnswerInput(ctx context.Context, threadID, callID string, values map[string]json.RawMessage, dismiss bool) error
	// Status reads the thread's state.
	Status(ctx context.Context, threadID string) (*ThreadStatus, error)
	// Threads lists every thread, or only parent's children when parent
	// is set.
	Threads(ctx context.Context, parent string) ([]api.Thread, error)
}

// ThreadStatus is the part of GET /v1/threads/{id} the client uses.
type ThreadStatus struct {
	// ParentID is empty for a session's root thread; RootID is the
	// session's root thread.
	ParentID string `json:"parent_id"`
	RootID   string `json:"root_id"`
	Status   string `json:"status"`
	// State is where the thread stands, its children included (an
	// api.ThreadState); empty from a runtime that does not say.
	State        string `json:"state"`
	Queued       int    `json:"queued"`
	LastSeq      int64  `json:"last_seq"`
	PendingCalls []struct {
		CallID   string `json:"call_id"`
		ToolName string `json:"tool_name"`
	} `json:"pending_calls"`
	Children []string `json:"children"`
	Choices  []struct {
		CallID   string   `json:"call_id"`
		ToolName string   `json:"tool_name"`
		Prompt   string   `json:"prompt"`
		Choices  []string `json:"choices"`
		Default  int      `json:"default"`
	} `json:"choices"`
	Inputs []struct {
		CallID   string          `json:"call_id"`
		ToolName string          `json:"tool_name"`
		Prompt   string          `json:"prompt"`
		Fields   json.RawMessage `json:"fields"`
	} `json:"inputs"`
	// Subscriptions are the thread's subscriptions; one whose state is
	// "active" still produces events.
	Subscriptions []struct {
		CallID   string `json:"call_id"`
		ToolName string `json:"tool_name"`
		State    string `json:"state"`
	} `json:"subscriptions"`
	// Usage sums the tokens of the thread's completions and SessionUsage,
	// on a root thread, those of its whole session; nil when none were
	// reported.
	Usage        *api.Usage `json:"usage"`
	SessionUsage *api.Usage `json:"session_usage"`
	// Budgets, on a root thread, are the budgets of the session's tools
	// with what each spent.
	Budgets []api.Budget `json:"budgets"`
	// SessionBudget, on a root thread, is the budget of the session
	// with what it spent; nil without one.
	SessionBudget *api.SessionBudget `json:"session_budget"`
}

// activeSubscriptions names the tools of the thread's active
// subscriptions.
func (st *ThreadStatus) activeSubscriptions() []string {
	var out []string
	for _, s := range st.Subscriptions {
		if s.State == string(api.SubscriptionActive) {
			out = append(out, s.ToolName)
		}
	}
	return out
}

// choiceEvents returns the thread's open choices as user_choice events,
// as the event stream sends them on connect.
func (st *ThreadStatus) choiceEvents() []Event {
	var out []Event
	for _, c := range st.Choices {
		out = append(out, Event{Type: "user_choice", Data: mustJSON(map[string]any{
			"call_id": c.CallID, "name": c.ToolName, "prompt": c.Prompt, "choices": c.Choices, "default": c.Default})})
	}
	for _, in := range st.Inputs {
		out = append(out, Event{Type: "user_input", Data: mustJSON(map[string]any{
			"call_id": in.CallID, "name": in.ToolName, "prompt": in.Prompt, "fields": in.Fields})})
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// Tool names the runtime gives a meaning to, as histories and events show
// them. They are the runtime's (runtime.BuiltinSleep and so on), repeated
// here so that the terminal client needs only the client API's packages;
// a test checks that they agree.
const (
	// toolSleep is the built-in sleep.
	toolSleep = "sleep"
	// toolSpawnThread is the built-in that starts a child thread.
	toolSpawnThread = "spawn_thread"
	// toolInjected is the synthetic call that carries a subscription
	// event or a child's report into the history.
	toolInjected = "receive_event__injected"
)
