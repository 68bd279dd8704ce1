package api

// This file holds what deleting a whole session shares between the
// runtime, its HTTP surface and the Go client: the answer of DELETE
// /v1/threads/{id} and the error of a session that is moving.

import "fmt"

// ErrSessionMoving is a session that is being moved to another runtime
// right now: it cannot be deleted (nor changed otherwise) until the move
// ends. It wraps ErrConflict: the client API answers it 409.
var ErrSessionMoving = fmt.Errorf("the session is being moved to another runtime: %w", ErrConflict)

// DeleteSessionResponse is the answer of DELETE /v1/threads/{id}: how
// many threads (the root and its children) the deletion removed.
type DeleteSessionResponse struct {
	DeletedThreads int `json:"deleted_threads"`
}
