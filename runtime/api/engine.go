package api

// This file holds what the runtime's Go API and its HTTP surface
// (runtime/httpapi) share beyond the wire types: who a request comes from
// (Caller), the errors the HTTP layer turns into statuses, a thread's
// event stream, and the answer to a tool's callback. The runtime implements
// them; httpapi serves them without importing the runtime.

import (
	"context"
	"encoding/json"
	"errors"
)

// MaxMessageBytes bounds the text of one user message.
const MaxMessageBytes = 256 << 10

// Errors of the runtime's thread methods, returned wrapped; the client API
// answers them 404 (ErrUnknownThread, ErrNoChoice), 502
// (ErrChoiceDelivery), 400 (ErrBadInput), 429 (ErrTooManyStreams) and 503
// (ErrStreamsFull).
var (
	// ErrUnknownThread is a thread id that does not exist, or that the
	// Caller may not see.
	ErrUnknownThread = errors.New("unknown thread")
	// ErrBadInput is input the runtime refuses.
	ErrBadInput = errors.New("bad input")
	// ErrNoChoice is an answer to a user choice that is not waiting.
	ErrNoChoice = errors.New("no user choice is waiting for this call")
	// ErrChoiceDelivery is an answer the tool did not accept; the choice
	// stays open.
	ErrChoiceDelivery = errors.New("the tool did not accept the answer")
	// ErrTooManyStreams is one more event stream of a thread that has its
	// maximum.
	ErrTooManyStreams = errors.New("too many event streams on this thread")
	// ErrStreamsFull is one more event stream of a runtime that serves its
	// maximum.
	ErrStreamsFull = errors.New("too many event streams on this runtime")
)

// Caller is who a client API request comes from, as the front that
// authenticated it decided.
type Caller struct {
	// UserID is the user the caller acts for. A caller with a user id
	// sees only the sessions of that user, and the sessions it creates
	// belong to that user whatever the request says.
	UserID string
	// Admin callers see and drive every session, as requests without a
	// Caller do.
	Admin bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c: the runtime then answers for c (see
// Caller). A front that authenticates requests sets it before the
// runtime's handler sees them; without one every request acts as an admin.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller of ctx, if a front set one.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// ScopedUser returns the user the Caller of ctx is restricted to, and
// whether it is restricted at all (no Caller, or an admin, is not).
func ScopedUser(ctx context.Context) (string, bool) {
	c, ok := CallerFrom(ctx)
	if !ok || c.Admin {
		return "", false
	}
	return c.UserID, true
}

// Event is one event of a thread's stream, as GET
// /v1/threads/{id}/events sends it.
type Event struct {
	// ID identifies the event for a client that resumes (Last-Event-ID);
	// empty for an event that cannot be resumed from. Opaque: compare only
	// for equality.
	ID string
	// Type is one of the Event* constants.
	Type string
	// Data is the event's JSON payload.
	Data json.RawMessage
}

// EventStream is one client's stream of a thread's events: what it
// missed, then the live events. It holds one of the runtime's event
// stream slots until Close.
type EventStream interface {
	// Replay returns the events to send before any other: the thread's
	// state ending in a replay_done marker for a client that starts
	// afresh, nothing for one that resumes (its missed events and the
	// marker come from Next).
	Replay() []Event
	// Ready has a value whenever Next may have events, or the stream
	// ended.
	Ready() <-chan struct{}
	// Next returns the events queued since the last call; closed says the
	// stream ended and no more will come.
	Next() (events []Event, closed bool)
	// OnDrop sets f, called once if the stream is dropped for falling
	// behind (at once if it already was); f must not block.
	OnDrop(f func())
	// Closed reports whether the stream ended or was dropped.
	Closed() bool
	// DropReason says why the stream was dropped; "" if it was not.
	DropReason() string
	// Close ends the stream and gives its slot back.
	Close()
}

// CallbackResult is the runtime's answer to a tool's callback: the HTTP
// status and the message, sent as {"status": Message} with 200 and as
// {"error": Message} otherwise.
type CallbackResult struct {
	Status  int
	Message string
	// RetryAfter, when positive, is sent as Retry-After (seconds): the
	// tool should send the same message again later.
	RetryAfter int
	// TokenRefused says the callback URL's token is not one the runtime
	// issued (or still accepts): the body was not read, and nothing
	// changed. The runtime does not log it; the caller logs it with where
	// the request came from.
	TokenRefused bool
}

// ErrNotAllowed is a request the Caller may not make: one that acts on
// more than one user's sessions (importing sessions, moving them) from a
// client token bound to one user. The client API answers it 403.
var ErrNotAllowed = errors.New("not allowed with a client token bound to one user; use the runtime's own token")

// ErrConflict is a request that the session's state does not allow now:
// importing a session whose threads exist, acting on a session that is
// moving to another runtime. The client API answers it 409.
var ErrConflict = errors.New("conflicts with the session's state")

// ErrModelFailed is a request the model could not answer, such as a
// summary for a compaction on demand: the client API answers it 502 with
// the reason.
var ErrModelFailed = errors.New("the model failed")
