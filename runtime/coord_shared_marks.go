package runtime

// This file owns the dispatched marks of a runtime on a shared store (the
// shared side of coord.markDispatched): once a call's tool answered 200,
// the call goes from state new to dispatched. Each mark would be a commit
// of its own, and most calls get their result moments after the 200 (a
// tool that answers at once), which moves them to done and makes the mark
// moot. So a mark waits up to markDelay: marks still waiting then are
// written together, in one transaction; a mark whose call's result this
// process recorded meanwhile is dropped. The dispatcher waits for its mark
// either way, so that a thread counts as busy (Idle) until its calls'
// states are written.
//
// What a crash costs is unchanged in kind: a call whose 200 came but whose
// mark was not yet written stays new, and is dispatched again after a
// restart (Start) or by the sweep (redispatchOrphans); a tool sees the
// invocation twice, with the same id, as after a crash just before the
// mark's commit. The window is markDelay longer.

import (
	"context"
	"sync"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// markDelay is how long a dispatched mark waits for its call's result
// before it is written.
const markDelay = 250 * time.Millisecond

// markEndedKeep is how long a call's result is remembered for a mark that
// comes after it (its dispatcher read the 200 after the result was
// recorded).
const markEndedKeep = time.Second

// callKey names a call.
type callKey struct{ thread, call string }

// markWait is a mark waiting to be written since queued.
type markWait struct {
	queued time.Time
	done   chan struct{}
	err    error
}

// dispatchMarks are the waiting marks of a shared runtime.
type dispatchMarks struct {
	mu      sync.Mutex
	waiting map[callKey]*markWait
	// flushing says a write of the waiting marks is scheduled.
	flushing bool
	// ended and endedOld are the calls whose result was recorded in the
	// last markEndedKeep or two, swapped at endedSince.
	ended, endedOld map[callKey]struct{}
	endedSince      time.Time
}

// markDispatched waits up to markDelay for the call's result, then writes
// the mark with the others waiting; it returns once the mark is written
// or moot.
func (s *sharedCoord) markDispatched(_ context.Context, c store.Call) error {
	m := &s.marks
	k := callKey{c.ThreadID, c.CallID}
	m.mu.Lock()
	if m.endedLocked(k) {
		m.mu.Unlock()
		return nil
	}
	if m.waiting == nil {
		m.waiting = map[callKey]*markWait{}
	}
	w := &markWait{queued: time.Now(), done: make(chan struct{})}
	m.waiting[k] = w
	if !m.flushing {
		m.flushing = true
		time.AfterFunc(markDelay, s.flushMarks)
	}
	m.mu.Unlock()
	<-w.done
	return w.err
}

// endedLocked reports whether the call's result was recorded lately, and
// forgets it; m.mu is held.
func (m *dispatchMarks) endedLocked(k callKey) bool {
	if _, ok := m.ended[k]; ok {
		delete(m.ended, k)
		return true
	}
	if _, ok := m.endedOld[k]; ok {
		delete(m.endedOld, k)
		return true
	}
	return false
}

// callEnded drops the call's waiting mark, or remembers the call a short
// while for a mark that comes after its result.
func (s *sharedCoord) callEnded(threadID, callID string) {
	m := &s.marks
	k := callKey{threadID, callID}
	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.waiting[k]; ok {
		delete(m.waiting, k)
		close(w.done)
		return
	}
	now := time.Now()
	if m.ended == nil || now.Sub(m.endedSince) > markEndedKeep {
		m.endedOld, m.ended, m.endedSince = m.ended, map[callKey]struct{}{}, now
	}
	m.ended[k] = struct{}{}
}

// flushMarks writes the marks that waited markDelay in one transaction,
// each only if its call is still new, and releases their dispatchers; the
// younger ones wait for a later flush.
func (s *sharedCoord) flushMarks() {
	m := &s.marks
	m.mu.Lock()
	now := time.Now()
	var batch map[callKey]*markWait
	var next time.Time
	for k, w := range m.waiting {
		if due := w.queued.Add(markDelay); due.After(now) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		if batch == nil {
			batch = map[callKey]*markWait{}
		}
		batch[k] = w
		delete(m.waiting, k)
	}
	m.flushing = !next.IsZero()
	if m.flushing {
		time.AfterFunc(next.Sub(now), s.flushMarks)
	}
	m.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	// Also at shutdown: the tools accepted these calls.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.r.baseCtx), 10*time.Second)
	defer cancel()
	err := s.update(ctx, func(tx store.Tx) error {
		for k := range batch {
			if _, err := tx.SetCallState(k.thread, k.call, store.CallDispatched, store.CallNew); err != nil {
				return err
			}
		}
		return nil
	})
	for _, w := range batch {
		w.err = err
		close(w.done)
	}
}
