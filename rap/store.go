package rap

import (
	"context"
	"encoding/json"
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
// a restarted tool server needs to answer it. The arguments are not kept.
type CallRecord struct {
	GroupID     string `json:"group_id"`
	ID          string `json:"id"`
	CallID      string `json:"call_id,omitempty"`
	Operation   string `json:"operation,omitempty"`
	CallbackURL string `json:"callback_url"`
	// Accepted is when the invocation was acknowledged.
	Accepted time.Time `json:"accepted"`
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
