package runtime

// This file owns what the runtime keeps in memory of the sessions moving
// away from it or gone from it (move_out.go): which threads they hold,
// so that the hot paths (a thread's wake-up, a tool's callback) ask one
// map, and nothing at all while no session moves.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// moveEntry is one session that is moving away or gone.
type moveEntry struct {
	root  string
	id    string
	state store.MoveState
	// to is the destination runtime's base URL.
	to string
	// threads are the session's thread ids.
	threads []string
	// forward maps a call of a gone session to its callback URL at the
	// destination.
	forward map[moveCall]string
	// expires, when not zero, ends the forwarding of a gone session.
	expires time.Time
}

// moveCall names one call of a thread.
type moveCall struct{ thread, call string }

// moveTable maps the threads of moving and gone sessions to their entry.
// Its gate orders inputs against a session's records being read for
// sending: an input holds it shared from its check of the table to its
// commit (admitInput), and a move holds it alone while it marks a session
// as sending, so that every input taken before is in what is sent.
type moveTable struct {
	gate     sync.RWMutex
	n        atomic.Int32 // len(byThread), read without the lock
	mu       sync.RWMutex
	byThread map[string]*moveEntry
	byRoot   map[string]*moveEntry
}

// of returns the entry of the session thread belongs to, or nil; a gone
// session whose forwarding period is over has none.
func (t *moveTable) of(thread string) *moveEntry {
	if t.n.Load() == 0 {
		return nil
	}
	t.mu.RLock()
	e := t.byThread[thread]
	t.mu.RUnlock()
	if e != nil && !e.expires.IsZero() && time.Now().After(e.expires) {
		t.drop(e.root)
		return nil
	}
	return e
}

// paused reports whether thread's session is moving: its slices wait.
func (t *moveTable) paused(thread string) bool {
	e := t.of(thread)
	return e != nil && e.state != store.MoveGone
}

// set adds or replaces e.
func (t *moveTable) set(e *moveEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byThread == nil {
		t.byThread, t.byRoot = map[string]*moveEntry{}, map[string]*moveEntry{}
	}
	if old := t.byRoot[e.root]; old != nil {
		for _, th := range old.threads {
			delete(t.byThread, th)
		}
	}
	t.byRoot[e.root] = e
	for _, th := range e.threads {
		t.byThread[th] = e
	}
	t.n.Store(int32(len(t.byThread)))
}

// drop removes the session whose root thread is root.
func (t *moveTable) drop(root string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byRoot[root]; e != nil {
		for _, th := range e.threads {
			delete(t.byThread, th)
		}
		delete(t.byRoot, root)
	}
	t.n.Store(int32(len(t.byThread)))
}
