package api

// This file holds the wire types of moving a session from one runtime to
// another: the client's request to the source runtime, and the messages
// the two runtimes exchange (docs/migration.md).

import (
	"errors"
	"fmt"
)

// MoveRequest is the body of POST /v1/threads/{id}/migrate: move the
// session whose root thread is id to another runtime.
type MoveRequest struct {
	// To is the destination runtime's base URL, or the name of one of
	// the source runtime's configured remotes.
	To string `json:"to"`
	// Token is the destination's client token; empty takes the remote's
	// configured token.
	Token string `json:"token,omitempty"`
}

// MoveResponse is the answer to a completed move.
type MoveResponse struct {
	// Session is the root thread id, the same at the destination.
	Session string `json:"session"`
	// MovedTo is the destination runtime's base URL.
	MovedTo string `json:"moved_to"`
	// Threads counts the session's threads that moved.
	Threads int `json:"threads"`
	// Migrated names the toolsets whose servers moved the session's state
	// (POST /migrate).
	Migrated []string `json:"migrated,omitempty"`
}

// MovedResponse is the body of the 308 answer to a request for a session
// that moved to another runtime.
type MovedResponse struct {
	// Error is "moved".
	Error string `json:"error"`
	// MovedTo is the session's address at its new runtime.
	MovedTo string `json:"moved_to"`
}

// MovedError is the error of a request for a session that moved to
// another runtime: the client API answers it 308 Permanent Redirect.
type MovedError struct {
	// Session is the moved session's root thread id.
	Session string
	// To is the destination runtime's base URL.
	To string
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("session %s moved to the runtime at %s", e.Session, e.To)
}

// ErrMoveFailed is a move that failed before the destination committed
// it: a tool server's /migrate, the destination's refusal, the network.
// The session stays at the source as it was. The client API answers it
// 502 with the reason.
var ErrMoveFailed = errors.New("the move failed and the session stays here")

// ErrMoveUndecided is a move whose session was sent to the destination,
// which has not said whether it took it: the session stays frozen at the
// source, which keeps asking and then finishes or undoes the move on its
// own. The client API answers it 504.
var ErrMoveUndecided = errors.New("the move's outcome is not known yet")

// ErrMoving is a request for a session that is moving to another runtime
// right now, and cannot be taken until the move ends: the client API
// answers it 503 with Retry-After.
var ErrMoving = errors.New("the session is moving to another runtime; retry in a moment")

// MovePrepare is the body of the source runtime's POST /v1/migrations to
// the destination: it asks the destination to get ready for a session.
type MovePrepare struct {
	// Version is the migration protocol's version, 1.
	Version int `json:"version"`
	// ID identifies the move at both ends.
	ID string `json:"id"`
	// Secret authenticates the rest of the move's requests (commit,
	// abort, status), which carry it as their bearer token.
	Secret string `json:"secret"`
	// Session is the root thread id.
	Session string `json:"session"`
	// Source is the source runtime's public base URL.
	Source string `json:"source"`
	// StoreID identifies the source's store: a destination on the same
	// store refuses the move.
	StoreID string `json:"store_id,omitempty"`
	// Toolsets names the toolsets the session uses.
	Toolsets []string `json:"toolsets"`
}

// MovePrepared is the destination's answer to MovePrepare.
type MovePrepared struct {
	// Toolsets maps each toolset name the destination serves to the base
	// URL of its tool server there: the destination_url of /migrate.
	Toolsets map[string]string `json:"toolsets"`
	// Commit, Abort and Status are the URLs of the move's next requests.
	Commit string `json:"commit"`
	Abort  string `json:"abort"`
	Status string `json:"status"`
}

// Forward is where the source sends what still reaches it for one call
// of a moved session: the call's callback URL at the destination.
type Forward struct {
	Thread      string `json:"thread"`
	CallID      string `json:"call_id"`
	CallbackURL string `json:"callback_url"`
}

// MoveState is the destination's account of a move: the answer to commit
// and to status.
type MoveState struct {
	// State is "arriving" (prepared, not committed), "arrived" or
	// "aborted"; "unknown" for a move the destination never prepared.
	State string `json:"state"`
	// Forward, once arrived, lists the callback URLs of the session's
	// calls that may still get a result or events.
	Forward []Forward `json:"forward,omitempty"`
}
