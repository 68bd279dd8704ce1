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
