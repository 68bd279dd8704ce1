package runtime

// This file owns wake-ups across processes (the shared side of the seam,
// coord_shared.go): on a store several processes share, an input
// committed by one process for a thread another process holds wakes that
// thread at once, through the store's notifications (PostgreSQL
// LISTEN/NOTIFY), instead of after the sweep. The sweep
// (coord_shared_sweep.go) stays the safety net for a notification missed
// while the listener reconnects.

import (
	"context"
	"sync"
	"time"
)

// wakeListener is a store that hears of the inputs other processes commit.
// The PostgreSQL store is one; the SQLite store, held by one process, is
// not, and needs none.
type wakeListener interface {
	// ListenWakes calls ready once it listens, then wake with the id of
	// each thread another process committed an inbox row for, after that
	// commit. It returns when ctx ends, or with an error when its
	// connection fails (then it may be called again).
	ListenWakes(ctx context.Context, ready func(), wake func(threadID string)) error
}

// listenReadyWait bounds how long Start waits for the listener to listen.
const listenReadyWait = 10 * time.Second

// startWakeListener starts listening for wake-ups when the store offers
// them, and waits (a bounded time) until it listens, so that inputs
// committed elsewhere after Start returns wake this process.
func (s *sharedCoord) startWakeListener() {
	wl, ok := s.r.cfg.Store.(wakeListener)
	if !ok {
		return
	}
	s.r.keepListening(func(ctx context.Context, ready func()) error {
		return wl.ListenWakes(ctx, ready, s.woken)
	}, "listening for wake-ups from other processes failed; retrying (the sweep covers the gap)",
		"not yet listening for wake-ups from other processes; inputs they commit wait for the sweep meanwhile")
}

// keepListening runs listen in the background until the runtime stops,
// calling it again after a failure (logged with failed) with a backoff
// from 100 ms to 5 s, reset once it listens again. It returns once the
// first listen is ready, or after listenReadyWait (logging notReady).
func (r *Runtime) keepListening(listen func(ctx context.Context, ready func()) error, failed, notReady string) {
	ready := make(chan struct{})
	var once sync.Once
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		pause := 100 * time.Millisecond
		for {
			err := listen(r.baseCtx, func() { once.Do(func() { close(ready) }); pause = 100 * time.Millisecond })
			if r.baseCtx.Err() != nil {
				return
			}
			r.log.Warn(failed, "err", err, "retry_in", pause)
			select {
			case <-r.baseCtx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 5*time.Second)
		}
	}()
	select {
	case <-ready:
	case <-time.After(listenReadyWait):
		r.log.Warn(notReady)
	case <-r.baseCtx.Done():
	}
}

// woken handles another process's notification that threadID has a new
// input. The process holding the thread acts on it: a running worker looks
// at the inbox again, and a thread whose last slice failed (its lease kept
// until it expires) runs again at once, as a new message retries it (RAP
// RT-4). Other processes leave it: the committing process takes a thread
// nobody holds itself, and the sweep takes one a dead process held.
func (s *sharedCoord) woken(threadID string) {
	r := s.r
	r.mu.Lock()
	_, resident := r.threads[threadID]
	_, failed := r.failed[threadID]
	r.mu.Unlock()
	if resident || failed {
		r.wake(threadID)
	}
}
