package rap

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// OutboxMessage is one callback message waiting to be delivered.
type OutboxMessage struct {
	// Key identifies the message; enqueueing the same key twice keeps one copy.
	Key string
	// URL is the callback URL the message is POSTed to.
	URL string
	// Body is the JSON message.
	Body []byte
	// Attempts counts delivery attempts so far.
	Attempts int
	// Created is when the message was first enqueued.
	Created time.Time
	// EndsGroupID and EndsID, when set, name the call this message
	// answers: an Outbox that is also a CallJournal forgets that call in
	// the transaction that stores the message, so that no crash can leave
	// a call both answered and recorded as unfinished. Only Enqueue reads
	// them.
	EndsGroupID, EndsID string
	// TraceParent and TraceState, when set, are sent as the W3C
	// traceparent and tracestate headers of the callback: the trace
	// context of the invocation the message is about.
	TraceParent, TraceState string
	// ForID, when set, is the id of the invocation a message that names
	// no call itself (a view update) is about: it is delivered in that
	// call's order, behind the messages the call sent before it and ahead
	// of its result (see Sender.SendFor). An Outbox stores it with the
	// message.
	ForID string
}

// Outbox keeps callback messages durably until they are delivered, so that a
// tool server restart or a long runtime outage loses nothing (RAP IN-4).
type Outbox interface {
	// Enqueue stores m. It returns only once m is durable.
	Enqueue(ctx context.Context, m OutboxMessage) error
	// Pending returns up to limit undelivered messages, oldest first.
	Pending(ctx context.Context, limit int) ([]OutboxMessage, error)
	// Attempted records a failed attempt for key.
	Attempted(ctx context.Context, key string) error
	// Delivered removes the message with key.
	Delivered(ctx context.Context, key string) error
}

// SubscriptionRecord is what a tool server keeps about an active
// subscription so it can resume emitting events after a restart (RAP SU-1).
type SubscriptionRecord struct {
	// Invocation is the call that created the subscription: its ID is the
	// subscription's tool_call_id, and it holds the callback URL, group id
	// and arguments.
	Invocation Invocation `json:"invocation"`
	// State is optional author data, such as a cursor, saved with the record.
	State json.RawMessage `json:"state,omitempty"`
	// Created is when the subscription started.
	Created time.Time `json:"created"`
}

// SubscriptionStore keeps active subscriptions durably.
type SubscriptionStore interface {
	// SaveSubscription inserts or replaces the record for (group id, id).
	SaveSubscription(ctx context.Context, r SubscriptionRecord) error
	// DeleteSubscription forgets one subscription; unknown ids are not an error.
	DeleteSubscription(ctx context.Context, groupID, id string) error
	// ListSubscriptions returns every stored subscription.
	ListSubscriptions(ctx context.Context) ([]SubscriptionRecord, error)
}

// Store is the durable state of a tool server: its outbox and its
// subscriptions. Package rap/durable provides a SQLite implementation.
type Store interface {
	Outbox
	SubscriptionStore
}

// CallRecord is what a CallJournal keeps about an accepted invocation: what
// a restarted tool server needs to answer it. The arguments are not kept,
// unless the handler saved a state (Call.SaveState).
type CallRecord struct {
	GroupID string `json:"group_id"`
	ID      string `json:"id"`
	CallID  string `json:"call_id,omitempty"`
	// Operation is the tool name.
	Operation string `json:"operation,omitempty"`
	// CallbackURL is where the result goes; it is empty for a call run
	// synchronously with Server.Invoke, whose result goes back to its
	// caller directly.
	CallbackURL string `json:"callback_url"`
	// Accepted is when the invocation was acknowledged.
	Accepted time.Time `json:"accepted"`
	// State is what the handler last saved with Call.SaveState, with the
	// invocation it needs to resume (arguments included); empty when it
	// saved nothing. Only a CallStateJournal keeps it; BeginCall ignores it.
	State json.RawMessage `json:"state,omitempty"`
	// TraceParent and TraceState are the W3C trace context headers the
	// invocation carried (docs/observability.md), sent back with the
	// call's callbacks, also after a restart; empty when it carried none,
	// and in a journal written before gorap kept them.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// CallJournal is an optional part of a Store. A server whose Store has it
// records every invocation before acknowledging it, and forgets it once its
// result is in the outbox. A call still recorded when the server starts was
// running when the previous process died: Start answers it with an error
// result, so that the runtime stops waiting for it and the model can decide
// whether to call again, instead of the call staying pending for ever.
// A Store with a CallJournal must forget the call named by an
// OutboxMessage's EndsGroupID and EndsID in the transaction of Enqueue.
// Package rap/durable implements it.
type CallJournal interface {
	// BeginCall records r. It returns only once r is durable.
	BeginCall(ctx context.Context, r CallRecord) error
	// EndCall forgets the call (group id, id); unknown ids are not an error.
	// (The server ends a call when it enqueues its result, through
	// OutboxMessage.EndsGroupID and EndsID; EndCall is for the rest.)
	EndCall(ctx context.Context, groupID, id string) error
	// UnfinishedCalls returns every recorded call, oldest first.
	UnfinishedCalls(ctx context.Context) ([]CallRecord, error)
}

// CallStateJournal is an optional part of a CallJournal that keeps a
// state with a recorded call, so that a restarted server resumes the call
// (see Call.SaveState) instead of answering it with an error result.
// UnfinishedCalls returns the state in CallRecord.State. Package
// rap/durable implements it.
type CallStateJournal interface {
	CallJournal
	// SaveCallState stores state with the recorded call (group id, id),
	// replacing the state saved before. It returns only once the state is
	// durable. A call that is not recorded (it has ended) is left
	// unrecorded, and that is not an error.
	SaveCallState(ctx context.Context, groupID, id string, state []byte) error
}

// MaxCallStateBytes bounds the encoded state Call.SaveState stores: the
// invocation with its arguments, and the handler's state.
const MaxCallStateBytes = 4 << 20

// SequencedMessage is an outbox message with its position in enqueue order.
type SequencedMessage struct {
	OutboxMessage
	// Seq grows with every enqueue and is never reused: a message
	// enqueued later has a larger Seq.
	Seq int64
}

// SequencedOutbox is an Outbox that can list the messages enqueued after a
// position. Sender.Run uses it when the Outbox provides it, so that it
// reads each message once instead of re-reading the ones it already holds;
// this keeps a large backlog cheap to drain. rap/durable implements it.
type SequencedOutbox interface {
	Outbox
	// PendingAfter returns up to limit undelivered messages whose Seq is
	// greater than after, in Seq order. A message must become visible
	// only after every message with a smaller Seq has.
	PendingAfter(ctx context.Context, after int64, limit int) ([]SequencedMessage, error)
}

// DestinationOutbox is a SequencedOutbox that can list one destination's
// messages. Sender.Run holds a bounded number of messages per destination
// (see Destination); when a destination's backlog is larger, Run reads the
// rest with PendingFor as the destination drains, so that a dead runtime's
// backlog never fills the memory the healthy ones need. rap/durable
// implements it; without it Run filters PendingAfter.
type DestinationOutbox interface {
	SequencedOutbox
	// PendingFor returns up to limit undelivered messages whose Seq is
	// greater than after and whose URL belongs to dest (Destination(URL)
	// == dest), in Seq order.
	PendingFor(ctx context.Context, dest string, after int64, limit int) ([]SequencedMessage, error)
}

// DeadLetter is a callback message the Sender stopped trying to deliver:
// its retries outlived RetryPolicy.GiveUpAfter, or the receiver refused it
// with a final 4xx answer.
type DeadLetter struct {
	OutboxMessage
	// DeadAt is when delivery stopped.
	DeadAt time.Time
	// Status is the HTTP status of the last attempt, 0 when no answer came.
	Status int
	// Reason says why delivery stopped, without secrets.
	Reason string
}

// DeadLetterStore is an optional part of an Outbox that keeps the messages
// Sender.Run stopped delivering, so that an operator can list them and
// retry or drop them (the command "rap outbox" does for rap/durable).
// Without it, a dead message is logged and removed. rap/durable and the
// in-memory outbox of a Server without a Store implement it.
type DeadLetterStore interface {
	// DeadLetter moves the pending message key into the dead letters,
	// recording status and reason. An unknown key is not an error.
	DeadLetter(ctx context.Context, key string, status int, reason string) error
	// DeadLetters returns up to limit dead letters, oldest first.
	DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
	// RetryDeadLetter moves a dead letter back into the outbox, at the
	// end of its queue with its attempts reset and Created set to now.
	// An unknown key is an error wrapping ErrNoDeadLetter.
	RetryDeadLetter(ctx context.Context, key string) error
	// DropDeadLetter forgets a dead letter. An unknown key is an error
	// wrapping ErrNoDeadLetter.
	DropDeadLetter(ctx context.Context, key string) error
}

// ErrNoDeadLetter is wrapped by RetryDeadLetter and DropDeadLetter for a
// key that names no dead letter.
var ErrNoDeadLetter = errors.New("no dead letter with that key")
