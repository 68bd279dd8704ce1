package sqlite

import (
	"bytes"
	"slices"
	"sync"

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
// every cycle reads again (issue 11 item 4): a thread's row (a slice loads
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

// rowOverlay is one writer transaction's view of the cache: entries it
// read or wrote, and the ids whose cached entries it invalidated.
type rowOverlay struct {
	threads      map[string]store.Thread
	lastSeq      map[string]int64
	stale        map[string]bool // thread ids whose entries the transaction changed
	calls        map[callKey]store.Call
	staleCalls   map[callKey]bool
	pending      map[string][]string
	stalePending map[string]bool
}

func (o *rowOverlay) thread(c *rowCache, id string) (store.Thread, bool) {
	if th, ok := o.threads[id]; ok {
		return cloneThread(th), true
	}
	if o.stale[id] {
		return store.Thread{}, false
	}
	c.mu.Lock()
	th, ok := c.threads[id]
	c.mu.Unlock()
	return cloneThread(th), ok
}

func (o *rowOverlay) setThread(id string, th store.Thread) {
	if o.threads == nil {
		o.threads = map[string]store.Thread{}
	}
	o.threads[id] = cloneThread(th)
}

func (o *rowOverlay) last(c *rowCache, id string) (int64, bool) {
	if n, ok := o.lastSeq[id]; ok {
		return n, true
	}
	if o.stale[id] {
		return 0, false
	}
	c.mu.Lock()
	n, ok := c.lastSeq[id]
	c.mu.Unlock()
	return n, ok
}

func (o *rowOverlay) setLast(id string, n int64) {
	if o.lastSeq == nil {
		o.lastSeq = map[string]int64{}
	}
	o.lastSeq[id] = n
}

// forget invalidates the thread's entries, in this transaction and, once
// it commits, in the cache.
func (o *rowOverlay) forget(id string) {
	delete(o.threads, id)
	delete(o.lastSeq, id)
	if o.stale == nil {
		o.stale = map[string]bool{}
	}
	o.stale[id] = true
}

// call returns the cached row of a tool call.
func (o *rowOverlay) call(c *rowCache, k callKey) (store.Call, bool) {
	if cl, ok := o.calls[k]; ok {
		return cloneCall(cl), true
	}
	if o.staleCalls[k] {
		return store.Call{}, false
	}
	c.mu.Lock()
	cl, ok := c.calls[k]
	c.mu.Unlock()
	return cloneCall(cl), ok
}

// setCall records a call's row as the transaction wrote or read it. A call
// whose arguments are too big to keep is forgotten instead.
func (o *rowOverlay) setCall(cl store.Call) {
	k := callKey{cl.ThreadID, cl.CallID}
	if len(cl.Arguments) > maxCachedCallArgs {
		o.forgetCall(k)
		return
	}
	if o.calls == nil {
		o.calls = map[callKey]store.Call{}
	}
	o.calls[k] = cloneCall(cl)
}

// forgetCall invalidates a call's entry, in this transaction and, once it
// commits, in the cache.
func (o *rowOverlay) forgetCall(k callKey) {
	delete(o.calls, k)
	if o.staleCalls == nil {
		o.staleCalls = map[callKey]bool{}
	}
	o.staleCalls[k] = true
}

// pendingIDs returns the ids of a thread's pending calls, if known.
func (o *rowOverlay) pendingIDs(c *rowCache, thread string) ([]string, bool) {
	if ids, ok := o.pending[thread]; ok {
		return ids, true
	}
	if o.stalePending[thread] {
		return nil, false
	}
	c.mu.Lock()
	ids, ok := c.pending[thread]
	c.mu.Unlock()
	return ids, ok // never changed in place: setPending stores a new slice
}

// setPending records the ids of all of a thread's pending calls.
func (o *rowOverlay) setPending(thread string, ids []string) {
	if o.pending == nil {
		o.pending = map[string][]string{}
	}
	o.pending[thread] = ids
}

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

// forgetPending invalidates a thread's pending call ids.
func (o *rowOverlay) forgetPending(thread string) {
	delete(o.pending, thread)
	if o.stalePending == nil {
		o.stalePending = map[string]bool{}
	}
	o.stalePending[thread] = true
}

// merge applies a committed transaction's overlay to the cache.
func (c *rowCache) merge(o *rowOverlay) {
	if len(o.threads) == 0 && len(o.lastSeq) == 0 && len(o.stale) == 0 && len(o.calls) == 0 && len(o.staleCalls) == 0 &&
		len(o.pending) == 0 && len(o.stalePending) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range o.stalePending {
		delete(c.pending, id)
	}
	if len(c.pending)+len(o.pending) > maxCachedRows {
		clear(c.pending)
	}
	for id, ids := range o.pending {
		c.pending[id] = ids
	}
	for k := range o.staleCalls {
		delete(c.calls, k)
	}
	if len(c.calls)+len(o.calls) > maxCachedRows {
		clear(c.calls)
	}
	for k, cl := range o.calls {
		c.calls[k] = cl
	}
	for id := range o.stale {
		delete(c.threads, id)
		delete(c.lastSeq, id)
	}
	if len(c.threads)+len(o.threads) > maxCachedRows {
		clear(c.threads)
	}
	for id, th := range o.threads {
		c.threads[id] = th
	}
	if len(c.lastSeq)+len(o.lastSeq) > maxCachedRows {
		clear(c.lastSeq)
	}
	for id, n := range o.lastSeq {
		c.lastSeq[id] = n
	}
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
