package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// MoveSession moves the session whose root thread is threadID to another
// runtime: req.To is its base URL or the name of one of this runtime's
// configured remotes, req.Token its client token. It returns once the
// destination holds the session; an error wrapping ErrConflict or a 502
// *Error means the session stayed here. From then on, this runtime
// answers requests for the session with an *Error wrapping ErrMoved.
func (c *Client) MoveSession(ctx context.Context, threadID string, req api.MoveRequest) (*api.MoveResponse, error) {
	var out api.MoveResponse
	if err := c.do(ctx, http.MethodPost, threadPath(threadID, "migrate"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// MovedTo returns, for an error of a request about a session that moved
// to another runtime, the session's address there.
func MovedTo(err error) (string, bool) {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusPermanentRedirect {
		return e.MovedTo, true
	}
	return "", false
}
