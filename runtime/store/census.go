package store

import "time"

// Censuses is implemented by the transactions of a store that can count,
// in one read, its threads by what they wait for and its pending tool
// calls by age: what the runtime's metrics show of the whole store. It is
// not part of Tx: the engine asserts it, and a store without it has no
// such gauges. A census reads every thread (and each table it needs
// once, grouped by thread): it is meant to run every few tens of seconds
// at most, never on a hot path.
type Censuses interface {
	// Census counts the store's threads and pending calls as q says.
	Census(q CensusQuery) (Census, error)
}

// CensusQuery says what the engine's records mean for a census: the
// store knows rows, the engine what they stand for.
type CensusQuery struct {
	// Now is the time calls' ages are counted to.
	Now time.Time
	// RetryTimerKind is the Kind of the timer that retries a thread's
	// failed completion.
	RetryTimerKind string
	// SleepTimerKind is the Kind of the timer of a pending sleep call
	// (one timer per such call).
	SleepTimerKind string
	// AuthKeyPrefix marks a call whose tool asked the user to authorize
	// it: the seen key AuthKeyPrefix + thread id + ":" + call id.
	AuthKeyPrefix string
	// LocalToolset is the Toolset of the calls the engine answers itself
	// (built-in tools): they wait on no tool server.
	LocalToolset string
	// Ages are the ages Census.PendingCalls and Census.WaitingThreads
	// count from, in order.
	Ages []time.Duration
}

// ThreadFacts is what a census knows of one thread that is not closed.
type ThreadFacts struct {
	// Moving: a move of its session out of the store is under way
	// (MoveOut in state MoveLeaving or MoveSending).
	Moving bool
	// Queued: it has inbox items.
	Queued bool
	// Retrying: it has a timer of kind CensusQuery.RetryTimerKind.
	Retrying bool
	// Asking: a tool asked its user something: a waiting Choice, or a
	// pending call of another toolset than LocalToolset marked with the
	// AuthKeyPrefix seen key.
	Asking bool
	// Tools: it has more pending calls than sleep timers, or an active
	// subscription.
	Tools bool
	// Sleeping: it has a timer of kind CensusQuery.SleepTimerKind.
	Sleeping bool
	// BusyBelow: one of its descendants, reached through threads that
	// are not closed, is Queued without Retrying, Asking, Tools or
	// Sleeping.
	BusyBelow bool
}

// Census is the result of a census.
type Census struct {
	// Closed counts the closed threads.
	Closed int64
	// Open counts the other threads by their facts.
	Open map[ThreadFacts]int64
	// PendingCalls[i] counts the pending calls (CallState.Pending) of
	// other toolsets than LocalToolset made at least Ages[i] before Now.
	PendingCalls []int64
	// WaitingThreads[i] counts the threads that have such a call.
	WaitingThreads []int64
}
