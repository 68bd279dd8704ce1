package client

import (
	"context"
	"strconv"

	"github.com/gorap/gorap/runtime/api"
)

// Waiting returns up to limit threads waiting longest, oldest first (GET
// /v1/waiting): what each waits on, since when, and its last error; 0 is
// the runtime's default (api.DefaultWaitingLimit). A token bound to a user
// lists that user's threads only.
func (c *Client) Waiting(ctx context.Context, limit int) (*api.WaitingResponse, error) {
	path := "/v1/waiting"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var out api.WaitingResponse
	if err := c.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
