package sqlite

import (
	"bytes"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// maxCachedRows bounds each map of a rowCache; past it the map is emptied
// and refilled as threads are read again.
const maxCachedRows = 8192

// maxCachedCallArgs is the largest arguments document a cached call may
// hold; a call with more is read from the database each time, so the
// cache stays within maxCachedRows × this many bytes of arguments.
const maxCachedCallArgs = 2 << 10

// rowCache keeps what the writer connection last read or wrote of the rows
// every cycle reads again: a thread's row (a slice loads
// it each time), a thread's last message seq (each AppendMessages needs
// it) and a tool call's row (written by the slice that made the call, read
// back by the transaction that takes its result). It saves three
// statements a cycle.
//
// It is right because the writer is the only connection that writes:
// it holds the committed state, and a transaction's own reads and writes
// go to an overlay (rowOverlay) merged into it only once that transaction
// has committed, so a rollback leaves no trace. Reader connections
// (Store.View) do not use it: their snapshot may be older.
//
// Every statement that writes the threads table, or messages or a
// thread's inherit_seq, must go through a tx method that updates the
// overlay (SetThreadStatus, CreateThread, AppendMessages); so must every
// statement that writes the calls table (PutCalls, SetCallState).
type rowCache struct {
	mu      sync.Mutex
	threads map[string]store.Thread
	lastSeq map[string]int64
	calls   map[callKey]store.Call
	pending map[string][]string // a thread's pending (new or dispatched) call ids
}

// callKey names a tool call: its thread and its id.
type callKey struct{ thread, call string }

func newRowCache() *rowCache {
	return &rowCache{threads: map[string]store.Thread{}, lastSeq: map[string]int64{}, calls: map[callKey]store.Call{}, pending: map[string][]string{}}
}

// rowOverlay is one writer transaction's view of the cache: for each kind
// of row, the entries it read or wrote and the keys it invalidated.
type rowOverlay struct {
	threads changes[string, store.Thread]
	lastSeq changes[string, int64]
	calls   changes[callKey, store.Call]
	pending changes[string, []string]
}

// changes is what one transaction read or wrote of one kind of cached row
// (set), and the keys whose committed entries it invalidated (stale).
type changes[K comparable, V any] struct {
	set   map[K]V
	stale map[K]bool
}

// get returns the transaction's entry for k, else the committed one in
// base (read under mu) unless the transaction invalidated it.
func (ch *changes[K, V]) get(mu *sync.Mutex, base map[K]V, k K) (V, bool) {
	if v, ok := ch.set[k]; ok {
		return v, true
	}
	if ch.stale[k] {
		var zero V
		return zero, false
	}
	mu.Lock()
	v, ok := base[k]
	mu.Unlock()
	return v, ok
}

func (ch *changes[K, V]) put(k K, v V) {
	if ch.set == nil {
		ch.set = map[K]V{}
	}
	ch.set[k] = v
}

// forget invalidates k, in this transaction and, once it commits, in the
// cache.
func (ch *changes[K, V]) forget(k K) {
	delete(ch.set, k)
	if ch.stale == nil {
		ch.stale = map[K]bool{}
	}
	ch.stale[k] = true
}

func (ch *changes[K, V]) empty() bool { return len(ch.set) == 0 && len(ch.stale) == 0 }

// mergeInto applies committed changes to base, emptied first if it would
// grow past maxCachedRows. The caller holds the cache's lock.
func (ch *changes[K, V]) mergeInto(base map[K]V) {
	for k := range ch.stale {
		delete(base, k)
	}
	if len(base)+len(ch.set) > maxCachedRows {
		clear(base)
	}
	maps.Copy(base, ch.set)
}

func (o *rowOverlay) thread(c *rowCache, id string) (store.Thread, bool) {
	th, ok := o.threads.get(&c.mu, c.threads, id)
	return cloneThread(th), ok
}

func (o *rowOverlay) setThread(id string, th store.Thread) { o.threads.put(id, cloneThread(th)) }

func (o *rowOverlay) last(c *rowCache, id string) (int64, bool) {
	return o.lastSeq.get(&c.mu, c.lastSeq, id)
}

func (o *rowOverlay) setLast(id string, n int64) { o.lastSeq.put(id, n) }

// forget invalidates the thread's row and last seq.
func (o *rowOverlay) forget(id string) {
	o.threads.forget(id)
	o.lastSeq.forget(id)
}

// call returns the cached row of a tool call.
func (o *rowOverlay) call(c *rowCache, k callKey) (store.Call, bool) {
	cl, ok := o.calls.get(&c.mu, c.calls, k)
	return cloneCall(cl), ok
}

// setCall records a call's row as the transaction wrote or read it. A call
// whose arguments are too big to keep is forgotten instead.
func (o *rowOverlay) setCall(cl store.Call) {
	k := callKey{cl.ThreadID, cl.CallID}
	if len(cl.Arguments) > maxCachedCallArgs {
		o.calls.forget(k)
		return
	}
	o.calls.put(k, cloneCall(cl))
}

// moveCall records the new state of a call, if its row is cached (its
// arguments, never changed in place, stay shared: no copy).
func (o *rowOverlay) moveCall(c *rowCache, k callKey, to store.CallState, updated time.Time) {
	if cl, ok := o.calls.get(&c.mu, c.calls, k); ok {
		cl.State, cl.Updated = to, updated
		o.calls.put(k, cl)
	}
}

// pendingIDs returns the ids of a thread's pending calls, if known. The
// slice is never changed in place: notePending stores a new one.
func (o *rowOverlay) pendingIDs(c *rowCache, thread string) ([]string, bool) {
	return o.pending.get(&c.mu, c.pending, thread)
}

// setPending records the ids of all of a thread's pending calls.
func (o *rowOverlay) setPending(thread string, ids []string) { o.pending.put(thread, ids) }

// notePending records that a call of a thread is, or is no longer,
// pending, if the thread's pending calls are known.
func (o *rowOverlay) notePending(c *rowCache, thread, call string, pending bool) {
	ids, ok := o.pendingIDs(c, thread)
	if !ok {
		return
	}
	i := slices.Index(ids, call)
	switch {
	case pending && i < 0:
		o.setPending(thread, append(slices.Clip(ids), call))
	case !pending && i >= 0:
		o.setPending(thread, slices.Delete(slices.Clone(ids), i, i+1))
	}
}

// forgetCall invalidates a call's row and its thread's pending ids.
func (o *rowOverlay) forgetCall(k callKey) {
	o.calls.forget(k)
	o.pending.forget(k.thread)
}

// merge applies a committed transaction's overlay to the cache.
func (c *rowCache) merge(o *rowOverlay) {
	if o.threads.empty() && o.lastSeq.empty() && o.calls.empty() && o.pending.empty() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o.threads.mergeInto(c.threads)
	o.lastSeq.mergeInto(c.lastSeq)
	o.calls.mergeInto(c.calls)
	o.pending.mergeInto(c.pending)
}

// reset empties the cache: after a commit that failed, the writer may not
// know what the database holds.
func (c *rowCache) reset() {
	c.mu.Lock()
	clear(c.threads)
	clear(c.lastSeq)
	clear(c.calls)
	clear(c.pending)
	c.mu.Unlock()
}

// cloneThread copies the one field of a thread that shares memory, so a
// caller changing the Thread it got cannot change the cache.
func cloneThread(th store.Thread) store.Thread {
	th.OriginArgs = bytes.Clone(th.OriginArgs)
	return th
}

// cloneCall copies the one field of a call that shares memory.
func cloneCall(cl store.Call) store.Call {
	cl.Arguments = bytes.Clone(cl.Arguments)
	return cl
}
