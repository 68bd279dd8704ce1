package client

// This file owns the client's calls on whole sessions.

import (
	"context"
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// DeleteSession deletes a session, its root thread and every child
// thread, with their history, calls and timers (DELETE /v1/threads/{id}),
// and returns how many threads the runtime removed. It cannot be undone:
// export the session first to keep a copy. rootID must be the session's
// root thread: a child's id is refused (ErrBadRequest, naming its
// session); an unknown or already deleted session is ErrNotFound; a
// session being moved to another runtime is ErrConflict.
func (c *Client) DeleteSession(ctx context.Context, rootID string) (int, error) {
	var out api.DeleteSessionResponse
	if err := c.do(ctx, http.MethodDelete, threadPath(rootID), nil, &out); err != nil {
		return 0, err
	}
	return out.DeletedThreads, nil
}
