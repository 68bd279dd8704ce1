package store

import (
	"encoding/json"
	"time"
)

// Sessions reads and removes a session as a whole, for what works on
// sessions rather than threads: exporting one, importing it elsewhere,
// moving it to another runtime and deleting it. Reads return records as
// the other interfaces store them; none of them changes anything.
type Sessions interface {
	// SessionThreads returns the threads whose RootID is rootID, each
	// parent before its children (oldest first); none when there is no
	// such session. Backed by an index.
	SessionThreads(rootID string) ([]Thread, error)
	// ThreadTimers returns the thread's timers, earliest due first.
	ThreadTimers(threadID string) ([]Timer, error)
	// ThreadSeenKeys returns the dedup keys MarkKeySeen (or Enqueue)
	// recorded for the thread, in no particular order. Backed by an index.
	ThreadSeenKeys(threadID string) ([]string, error)
	// ThreadHeldEvents returns the thread's held events in arrival order,
	// leaving them held.
	ThreadHeldEvents(threadID string) ([]HeldEvent, error)
	// ThreadCallChecks returns the thread's scheduled call status checks.
	ThreadCallChecks(threadID string) ([]CallCheck, error)
	// SessionTrust returns the digests the session trusted on first use
	// (ToolsetTrust), by tool server base URL.
	SessionTrust(rootID string) (map[string]string, error)
	// ThreadUsage returns the sum of the Usage of the thread's own
	// messages (not those it inherits): every completion the thread ran
	// and saved.
	ThreadUsage(threadID string) (Usage, error)
	// DeleteSession removes the session's threads and everything kept of
	// them (histories, inbox, calls, subscriptions, views, timers, cached
	// toolsets, choices, held events, checks, seen keys, leases, oauth
	// links, thread events), and reports how many threads it removed: 0
	// when there was no such session. Its moves (Moves) stay.
	DeleteSession(rootID string) (int, error)
}

// MoveDirection says which end of a move a Move record is kept by.
type MoveDirection string

// Move directions.
const (
	// MoveOut is kept by the runtime a session leaves (the source).
	MoveOut MoveDirection = "out"
	// MoveIn is kept by the runtime a session comes to (the destination).
	MoveIn MoveDirection = "in"
)

// MoveState is where a move stands at one end.
type MoveState string

// Move states.
const (
	// MoveLeaving (source): the session is paused while it moves. A
	// runtime that restarts with a session in this state asks the
	// destination how the move ended and completes or undoes it.
	MoveLeaving MoveState = "leaving"
	// MoveSending (source): the session's records were sent to the
	// destination, which may have committed them. Its inputs wait until
	// the destination's answer, which a restart asks for again.
	MoveSending MoveState = "sending"
	// MoveGone (source): the destination holds the session; the source
	// keeps only the record, to forward what still reaches it.
	MoveGone MoveState = "gone"
	// MoveArriving (destination): a move was prepared and not committed.
	MoveArriving MoveState = "arriving"
	// MoveArrived (destination): the move committed here.
	MoveArrived MoveState = "arrived"
	// MoveAborted (destination): the move was called off; a commit of it
	// is refused.
	MoveAborted MoveState = "aborted"
)

// Move is one end's record of a session moving between two runtimes: the
// journal of a move under way, and afterwards the source's forwarding
// record. Secret is shared by the two ends of this one move: never log it.
type Move struct {
	RootID    string        `json:"root_id"`
	Direction MoveDirection `json:"direction"`
	// ID identifies the move at both ends.
	ID    string    `json:"id"`
	State MoveState `json:"state"`
	// Peer is the other runtime's base URL: the destination for MoveOut,
	// the source for MoveIn.
	Peer   string `json:"peer"`
	Secret string `json:"-"`
	// Data is what the end keeps of the move besides: the source's
	// forwarding table once the session is gone. Versioned by its writer.
	Data    json.RawMessage `json:"data,omitempty"`
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
	// Expires, when not zero, is when the record may be removed.
	Expires time.Time `json:"expires,omitzero"`
}

// Moves keeps the records of sessions moving between runtimes, one per
// session and direction.
type Moves interface {
	// PutMove inserts or replaces the record of (RootID, Direction).
	PutMove(m Move) error
	// SessionMove returns the record of (rootID, dir), or an error
	// wrapping ErrNotFound.
	SessionMove(rootID string, dir MoveDirection) (Move, error)
	// ListMoves returns every record, oldest first.
	ListMoves() ([]Move, error)
	// DeleteMove removes the record of (rootID, dir); none is not an
	// error.
	DeleteMove(rootID string, dir MoveDirection) error
}

// Compaction replaces, in what the model sees of a thread, the thread's
// history up to UpToSeq with Summary. The messages stay in the store:
// the history keeps every one of them.
type Compaction struct {
	ThreadID string `json:"thread_id"`
	// UpToSeq is the Seq of the last message the summary covers.
	UpToSeq int64 `json:"upto_seq"`
	// Summary is the text the model sees instead of those messages.
	Summary string `json:"summary"`
	// Messages is how many messages the summary covers, for people.
	Messages int `json:"messages"`
	// Usage is the token count of the completion that wrote the summary;
	// nil when its provider reported none.
	Usage *Usage `json:"usage,omitempty"`
	// Block, set for a compaction the model's API made itself
	// (model.CompactionBlock), is its block as the API sent it; the
	// requests after it send these bytes back instead of the messages it
	// covers. Empty for gorap's own compactions.
	Block   []byte    `json:"block,omitempty"`
	Created time.Time `json:"created"`
}

// Compactions keeps the compactions of each thread.
type Compactions interface {
	// AddCompaction records c. A compaction of the same thread and
	// UpToSeq is an error.
	AddCompaction(c Compaction) error
	// LatestCompaction returns the thread's compaction with the highest
	// UpToSeq, or an error wrapping ErrNotFound when it has none.
	LatestCompaction(threadID string) (Compaction, error)
	// ThreadCompactions returns the thread's compactions, by UpToSeq.
	ThreadCompactions(threadID string) ([]Compaction, error)
}
