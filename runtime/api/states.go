package api

// ThreadState says where a thread stands: ThreadInfo.State, and the
// state a turn_ended event reports. A thread's state covers its child
// threads: it is quiet only when they are quiet or closed too.
type ThreadState string

// Thread states, from the most to the least pressing: a thread is in the
// first one that holds. StateRunning (the thread has inputs to answer; a
// completion runs or is about to) comes after StateMoving.
const (
	// StateClosed: the thread is closed; it takes no more input.
	StateClosed ThreadState = "closed"
	// StateMoving: its session is moving to another runtime; inputs
	// wait until the move is decided.
	StateMoving ThreadState = "moving"
	// StateFailed: its last completion failed (or its session is past
	// its budget); the inputs stay queued, for an automatic retry or the
	// next message. The error event said why.
	StateFailed ThreadState = "failed"
	// StateWaitingUser: a tool waits for the user: a choice to answer
	// (RAP UC-1) or a link to authorize (RAP OA-1).
	StateWaitingUser ThreadState = "waiting_user"
	// StateWaitingTools: tool calls wait for their results, or active
	// subscriptions may deliver events.
	StateWaitingTools ThreadState = "waiting_tools"
	// StateWaitingTimer: the thread sleeps until a time (sleep,
	// sleep_until).
	StateWaitingTimer ThreadState = "waiting_timer"
	// StateWaitingChildren: nothing of its own is pending, but a child
	// thread (or one of theirs) is running or waiting.
	StateWaitingChildren ThreadState = "waiting_children"
	// StateQuiet: nothing is queued, running or pending in the thread
	// or its children: its turn is over, and nothing happens until a new
	// message.
	StateQuiet ThreadState = "quiet"
)

// Settled reports whether nothing more happens in a thread in state s
// without a new message: it is quiet, closed or failed.
func (s ThreadState) Settled() bool {
	return s == StateQuiet || s == StateClosed || s == StateFailed
}

// TurnEnded is the payload of EventTurnEnded: a turn of ThreadID (the
// stream's thread, or one of its descendants) ended, and State is where
// the stream's thread stands now.
type TurnEnded struct {
	// ThreadID is the thread whose turn ended.
	ThreadID string `json:"thread_id"`
	// State is the state of the thread whose stream carries the event.
	State ThreadState `json:"state"`
	// LastSeq is the Seq of the last saved message of the stream's
	// thread.
	LastSeq int64 `json:"last_seq"`
}
