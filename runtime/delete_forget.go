package runtime

// This file owns forgetting what the engine keeps in memory of threads
// that were deleted (DeleteSession, delete.go): their client event
// streams in this process, which end; the events still to come of them,
// which are dropped (the hub's tombstones); and the caches and maps of
// runtime.go keyed by thread or session.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// maxTombstones bounds how many deleted threads the hub remembers, to drop
// their late events; past it the oldest is forgotten (its thread's late
// events then find no stream to reach, and on a shared store are pruned
// with the other old events).
const maxTombstones = 1 << 16

// sessionDeletedMessage is the text of the error event that ends the
// event streams of a deleted session's threads.
const sessionDeletedMessage = "this session was deleted: its threads and their history are gone"

// forgetThreads forgets the threads ids of the session rootID, deleted
// from the store: their event streams in this process end with an error
// event saying so, later events of them are dropped, and the caches and
// maps keyed by them lose their entries.
func (r *Runtime) forgetThreads(rootID string, ids []string) {
	r.forgetThreadsSaying(rootID, ids, sessionDeletedMessage)
}

// forgetThreadsSaying is forgetThreads with the message of the error
// event that ends the threads' streams.
func (r *Runtime) forgetThreadsSaying(rootID string, ids []string, msg string) {
	r.hub.endThreads(ids, msg)
	for _, id := range ids {
		r.coord.forget(id) // local: the resume log and oauth links
		r.hist.drop(id)
		r.retries.disarmed(id)
		prefix := id + "\x00"
		r.confirmed.Range(func(k, _ any) bool {
			if s, ok := k.(string); ok && strings.HasPrefix(s, prefix) {
				r.confirmed.Delete(k)
			}
			return true
		})
	}
	r.users.forget(rootID)
	r.mu.Lock()
	delete(r.catalogs, rootID)
	for _, id := range ids {
		delete(r.failed, id)
	}
	r.signalLocked()
	r.mu.Unlock()
}

// threadDeleted reports whether the thread no longer exists in the store
// (another process, or this one, deleted its session); the engine then
// forgets it as forgetThreads does. A worker whose slice failed asks it,
// so that a slice that lost its thread ends quietly, without an error
// event or a retry, and without writing anything of the thread again.
func (r *Runtime) threadDeleted(threadID string) bool {
	if r.hub.isGone(threadID) {
		return true
	}
	ctx, cancel := context.WithTimeout(r.baseCtx, notifyTimeout)
	defer cancel()
	err := r.store.QuickView(ctx, func(tx store.Tx) error {
		_, err := tx.Thread(threadID)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		return false
	}
	r.forgetThreads(threadID, []string{threadID})
	return true
}

// endThreads ends the event streams of the threads ids in this process:
// each subscriber gets a last error event with msg, then its stream ends.
// The threads become tombstones: their later events are dropped.
func (h *hub) endThreads(ids []string, msg string) {
	data, _ := json.Marshal(api.Error{Message: msg})
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		h.buryLocked(id)
		for s := range h.subs[id] {
			s.finish(Event{Type: EventError, ThreadID: id, Data: data})
		}
		delete(h.subs, id)
		delete(h.turns, id)
		delete(h.inflight, id)
	}
}

// buryLocked makes threadID a tombstone; h.mu is held.
func (h *hub) buryLocked(threadID string) {
	if h.gone == nil {
		h.gone = map[string]struct{}{}
	}
	if _, ok := h.gone[threadID]; ok {
		return
	}
	h.gone[threadID] = struct{}{}
	h.graves = append(h.graves, threadID)
	for len(h.graves) > maxTombstones {
		delete(h.gone, h.graves[0])
		h.graves[0] = ""
		h.graves = h.graves[1:]
	}
}

// isGone reports whether threadID is a tombstone.
func (h *hub) isGone(threadID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.gone[threadID]
	return ok
}

// goneLocked reports whether threadID is a tombstone; h.mu is held.
func (h *hub) goneLocked(threadID string) bool {
	if len(h.gone) == 0 {
		return false
	}
	_, ok := h.gone[threadID]
	return ok
}

// finish queues e as the subscriber's last event, whatever its queue's
// bound: once its queue is taken, the subscriber is closed.
func (s *subscriber) finish(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	c := eventCost(e)
	s.queue = append(s.queue, e)
	s.bytes += c
	s.total.Add(int64(c))
	s.ending = true
	s.signal()
}

// drop forgets the thread's cached history.
func (c *historyCache) drop(thread string) {
	if c == nil || c.max < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[thread]; ok {
		c.lru.Remove(el)
		delete(c.entries, thread)
	}
}

// forget drops the session's user id.
func (u *userCache) forget(rootID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.users, rootID)
}
