package api

// This file holds what deleting a whole session shares between the
// runtime, its HTTP surface and the Go client: the answer of DELETE
// /v1/threads/{id} and the error of a session that is moving.

import "errors"

// ErrSessionMoving is a session that is being moved to another runtime
// right now: it cannot be deleted (nor changed otherwise) until the move
// ends. The client API answers it 409.
var ErrSessionMoving = errors.New("the session is being moved to another runtime")

// DeleteSessionResponse is the answer of DELETE /v1/threads/{id}: how
// many threads (the root and its children) the deletion removed.
type DeleteSessionResponse struct {
	DeletedThreads int `json:"deleted_threads"`
}
