package client

// This file owns the client's side of compaction: compacting a thread on
// demand, and the history together with its compactions.

import (
	"context"
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// CompactThread compacts a thread's history now (POST
// /v1/threads/{id}/compact): the thread's model summarises all but its
// last messages, and from then on sees the summary instead of them; the
// runtime keeps every message. It returns the new compaction. A thread
// with too little to summarise is an *Error wrapping ErrBadRequest whose
// Message says "nothing to compact yet" and why; an unknown thread is
// ErrNotFound.
func (c *Client) CompactThread(ctx context.Context, threadID string) (*api.Compaction, error) {
	var out api.Compaction
	if err := c.do(ctx, http.MethodPost, threadPath(threadID, "compact"), struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// HistoryWithCompactions returns the whole answer of GET
// /v1/threads/{id}/messages: every message of the thread, and the
// compactions of its history, oldest first. Each compaction's summary
// stands, in what the model sees, for the messages whose Seq is at most
// its UpToSeq.
func (c *Client) HistoryWithCompactions(ctx context.Context, threadID string) (*api.HistoryResponse, error) {
	var out api.HistoryResponse
	if err := c.do(ctx, http.MethodGet, threadPath(threadID, "messages"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
