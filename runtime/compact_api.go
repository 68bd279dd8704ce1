package runtime

// This file owns the client API's side of compaction: compacting a thread
// on demand, and the compactions GET /v1/threads/{id}/messages shows with
// the full history.

import (
	"context"
	"fmt"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// CompactThread compacts the thread now, whatever the size of its
// history: the model summarises all but its last messages (and any tool
// call still waiting for its result), and from then on sees the summary
// instead. A thread with too little to summarise is an error wrapping
// ErrBadInput.
func (r *Runtime) CompactThread(ctx context.Context, threadID string) (api.Compaction, error) {
	var th store.Thread
	var history []store.Message
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if th, err = visibleThread(ctx, tx, threadID); err != nil {
			return err
		}
		history, err = tx.History(threadID)
		return err
	})
	if err != nil {
		return api.Compaction{}, err
	}
	if over := r.sessionOverBudget(ctx, th.RootID); over != nil {
		return api.Compaction{}, fmt.Errorf("%w: the thread is not compacted: %v", api.ErrConflict, over)
	}
	prev, err := r.storedCompaction(ctx, th)
	if err != nil {
		return api.Compaction{}, err
	}
	c, err := r.compact(ctx, th, history, prev, 0, true)
	if err != nil {
		return api.Compaction{}, err
	}
	if c == nil {
		return api.Compaction{}, fmt.Errorf("%w: nothing to compact yet: the thread has %d messages, and its last %d (and any tool call still waiting for its result) are always kept whole",
			ErrBadInput, len(history), r.compactKeepLast())
	}
	r.hist.useView(threadID, c.UpToSeq)
	return apiCompaction(*c), nil
}

// Compactions returns the thread's compactions, oldest first.
func (r *Runtime) Compactions(ctx context.Context, threadID string) ([]api.Compaction, error) {
	var out []api.Compaction
	err := r.store.View(ctx, func(tx store.Tx) error {
		if _, err := visibleThread(ctx, tx, threadID); err != nil {
			return err
		}
		all, err := tx.ThreadCompactions(threadID)
		out = apiSlice(all, apiCompaction)
		return err
	})
	return out, err
}

func apiCompaction(c store.Compaction) api.Compaction {
	return api.Compaction{UpToSeq: c.UpToSeq, Messages: c.Messages, Summary: c.Summary, Created: c.Created}
}
