package api

import "time"

// Sizes of GET /v1/waiting: the threads it lists by default and at most.
const (
	DefaultWaitingLimit = 20
	MaxWaitingLimit     = 200
)

// MaxWaitItems is the most items WaitingThread.WaitingOn lists; the
// others are counted in WaitingThread.More.
const MaxWaitItems = 5

// What a thread waits on: WaitItem.Kind.
const (
	// WaitTool: a tool call waits for its tool server's result.
	WaitTool = "tool"
	// WaitUser: a tool call waits for the user: a choice to answer or a
	// link to authorize.
	WaitUser = "user"
	// WaitTimer: a sleep call waits until WaitItem.Due.
	WaitTimer = "timer"
	// WaitRetry: the thread's last completion failed and its inputs
	// stay queued, for the retry due at WaitItem.Due or, without one,
	// the next message.
	WaitRetry = "retry"
	// WaitSubscription: an active subscription (CallID, Tool), confirmed
	// at Since, waits for its events; listed for a thread that waits on
	// nothing else.
	WaitSubscription = "subscription"
	// WaitChildren: the thread waits only on its child thread ThreadID,
	// which is listed itself with what it waits on.
	WaitChildren = "children"
)

// WaitingResponse is the answer of GET /v1/waiting: the threads waiting
// longest, oldest first.
type WaitingResponse struct {
	// Threads are the threads, by Since, oldest first.
	Threads []WaitingThread `json:"threads"`
	// AsOf is the runtime's time when it read them: ages are counted to
	// it.
	AsOf time.Time `json:"as_of"`
}

// WaitingThread is one thread of GET /v1/waiting: what it waits on,
// since when, and why it failed if it did.
type WaitingThread struct {
	ThreadID string `json:"thread_id"`
	// ParentID is the parent thread's id, empty for a session's root
	// thread. A parent that waits on nothing of its own (its state is
	// waiting_children) is listed too, right after its first waiting
	// child, with a WaitChildren item for each of them.
	ParentID string `json:"parent_id,omitempty"`
	// RootID is the session's root thread.
	RootID string `json:"root_id"`
	// UserID is the session's end user, empty for the runtime's default.
	UserID string `json:"user_id,omitempty"`
	// Title is the session's title, or the start of its first user
	// message when it has none; empty when it has neither.
	Title string `json:"title,omitempty"`
	// State is the thread's own state (its children left out).
	State ThreadState `json:"state"`
	// Since is when the oldest of WaitingOn began.
	Since time.Time `json:"since"`
	// WaitingOn is what the thread waits on, oldest first: at most
	// MaxWaitItems.
	WaitingOn []WaitItem `json:"waiting_on"`
	// More counts what it waits on beyond WaitingOn.
	More int `json:"more,omitempty"`
	// LastError is why the thread's last completion failed, as this
	// process saw it or, while a retry is scheduled, as the process that
	// scheduled it recorded it; empty when neither knows.
	LastError string `json:"last_error,omitempty"`
	// LastErrorUnknown says that the thread failed (State failed) but
	// not in this process, or before it started: its error event and
	// the logs of the process that ran it say why.
	LastErrorUnknown bool `json:"last_error_unknown,omitempty"`
}

// WaitItem is one thing a thread waits on.
type WaitItem struct {
	// Kind is one of the Wait* constants.
	Kind string `json:"kind"`
	// CallID, Tool and Toolset name the call waited on (WaitTool,
	// WaitUser, WaitTimer).
	CallID  string `json:"call_id,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Toolset string `json:"toolset,omitempty"`
	// ThreadID names the child thread waited on (WaitChildren).
	ThreadID string `json:"thread_id,omitempty"`
	// Since is when the wait began: the call was made, or, for
	// WaitRetry, the oldest queued input arrived.
	Since time.Time `json:"since"`
	// Due is when a timer fires: the end of a sleep, or the next retry;
	// zero when there is none.
	Due time.Time `json:"due,omitzero"`
}
