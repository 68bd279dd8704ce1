package runtime

// This file owns retention (Config.Retention): a loop that deletes, now and
// then, the closed sessions nobody touched for longer than the retention.

import (
	"context"
	"errors"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// Bounds of the retention sweep.
const (
	// retentionPage is how many threads one read of the sweep takes.
	retentionPage = 500
	// retentionBatch is how many sessions one sweep deletes at most; the
	// next sweep goes on with the rest.
	retentionBatch = 200
	// minRetentionEvery and maxRetentionEvery bound how often the sweep
	// runs: Retention/10 within them.
	minRetentionEvery = time.Second
	maxRetentionEvery = time.Hour
)

// retentionEvery is how often the retention sweep runs.
func retentionEvery(retention time.Duration) time.Duration {
	return min(max(retention/10, minRetentionEvery), maxRetentionEvery)
}

// retentionLoop runs the retention sweep every retentionEvery, from
// Start until Shutdown.
func (r *Runtime) retentionLoop() {
	defer r.wg.Done()
	t := time.NewTicker(retentionEvery(r.cfg.Retention))
	defer t.Stop()
	for {
		n, err := r.sweepRetention(r.baseCtx, time.Now())
		if r.baseCtx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Error("retention: look for expired sessions; trying again at the next sweep", "err", err)
		}
		if n > 0 {
			r.log.Info("retention: deleted expired sessions", "sessions", n, "retention", r.cfg.Retention)
		}
		select {
		case <-r.baseCtx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepRetention deletes up to retentionBatch sessions that expired at
// now (see expired) and reports how many it deleted. It reads every
// thread, a page at a time (the store has no index of closed sessions by
// age). A session found open or moving when it comes to delete it is kept.
func (r *Runtime) sweepRetention(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-r.cfg.Retention)
	var after store.ThreadCursor
	deleted := 0
	for deleted < retentionBatch {
		var page []store.Thread
		var due []string
		err := r.store.View(ctx, func(tx store.Tx) error {
			var err error
			if page, err = tx.ThreadsPage(after, retentionPage); err != nil {
				return err
			}
			due = due[:0]
			for _, th := range page {
				if th.ParentID != "" || th.Status != store.ThreadClosed {
					continue
				}
				ok, err := expired(tx, th.ID, cutoff)
				if err != nil {
					return err
				}
				if ok {
					due = append(due, th.ID)
				}
			}
			return nil
		})
		if err != nil {
			return deleted, err
		}
		for _, id := range due {
			if deleted >= retentionBatch {
				break
			}
			_, err := r.deleteSession(ctx, id, true)
			switch {
			case err == nil:
				deleted++
			case errors.Is(err, errNotExpired), errors.Is(err, ErrSessionMoving), errors.Is(err, ErrUnknownThread):
				// Reopened, moving, or deleted by another process: kept
				// (or gone) as it is.
			default:
				return deleted, err
			}
		}
		if len(page) < retentionPage {
			break
		}
		after = store.CursorOf(page[len(page)-1])
	}
	return deleted, nil
}

// expired reports whether the session rootID expired at cutoff: every
// thread of it is closed, and the last activity of each, the Created time
// of its last message or, without one, of the thread itself, is before
// cutoff.
func expired(tx store.Tx, rootID string, cutoff time.Time) (bool, error) {
	threads, err := tx.SessionThreads(rootID)
	if err != nil || len(threads) == 0 {
		return false, err
	}
	for _, th := range threads {
		if th.Status != store.ThreadClosed {
			return false, nil
		}
		last, err := lastActivity(tx, th)
		if err != nil {
			return false, err
		}
		if !last.Before(cutoff) {
			return false, nil
		}
	}
	return true, nil
}

// lastActivity is the Created time of the thread's last message, or the
// thread's own when it has none (or only inherited ones, which are older).
func lastActivity(tx store.Tx, th store.Thread) (time.Time, error) {
	last := th.Created
	seq, err := tx.LastSeq(th.ID)
	if err != nil || seq == 0 {
		return last, err
	}
	msgs, err := tx.HistorySince(th.ID, seq-1)
	if err != nil {
		return last, err
	}
	for _, m := range msgs {
		if m.Created.After(last) {
			last = m.Created
		}
	}
	return last, nil
}
