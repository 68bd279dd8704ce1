package runtime

// This file owns the history cache: recently active threads' histories
// kept in memory, so a slice reads only what was added since, with the
// arranged model form of each (arrange.go) and its wire cache; and whether
// a call id is already used in a thread.

import (
	"container/list"
	"slices"
	"sync"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/store"
)

// defaultHistoryCacheThreads is how many threads' histories the engine
// keeps in memory when Config.HistoryCacheThreads is zero.
const defaultHistoryCacheThreads = 1024

// historyCache keeps the histories of recently active threads in memory so
// that a slice reads only the messages added since the thread's previous
// slice, not its whole history (store.Messages.HistorySince). A history is
// append-only and every prefix a read transaction returns is complete, so a
// cached prefix is never stale, only short: there is nothing to invalidate.
// The least recently used thread is dropped when the cache is full.
type historyCache struct {
	mu      sync.Mutex
	max     int
	lru     *list.List // of *historyEntry, most recent first
	entries map[string]*list.Element
}

type historyEntry struct {
	thread string
	msgs   []store.Message
	arr    *arranged // the model form of a settled prefix of msgs, or nil
	// ids holds the tool call ids of msgs[:idsUpTo], indexed as needed.
	ids     map[string]struct{}
	idsUpTo int
	// wire is the provider's encoding of the settled prefix, bounded by
	// model.DefaultWireCacheBytes per thread, made while wireDropped
	// images were left out of the requests (limitImages).
	wire        *model.WireCache
	wireDropped int
	// viewBase is the UpToSeq of the compaction arr and wire were built
	// over (compact.go), 0 for the whole history.
	viewBase int64
}

func newHistoryCache(max int) *historyCache {
	if max == 0 {
		max = defaultHistoryCacheThreads
	}
	return &historyCache{max: max, lru: list.New(), entries: map[string]*list.Element{}}
}

// get returns the cached prefix of the thread's history, nil when none.
// The result has no spare capacity, so appending to it never writes into
// the cache.
func (c *historyCache) get(thread string) []store.Message {
	if c == nil || c.max < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[thread]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return slices.Clip(el.Value.(*historyEntry).msgs)
}

// put records msgs as the thread's history prefix. A shorter prefix than
// the one cached is ignored (a slower reader must not undo a faster one).
func (c *historyCache) put(thread string, msgs []store.Message) {
	if c == nil || c.max < 0 || len(msgs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[thread]; ok {
		e := el.Value.(*historyEntry)
		if len(msgs) >= len(e.msgs) {
			e.msgs = msgs
		}
		c.lru.MoveToFront(el)
		return
	}
	c.entries[thread] = c.lru.PushFront(&historyEntry{thread: thread, msgs: msgs})
	for c.lru.Len() > c.max {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.entries, last.Value.(*historyEntry).thread)
	}
}

// load returns the thread's whole history as of tx: the cached prefix plus
// what was appended since, or a full read when nothing is cached. It
// refreshes the cache. The result has no spare capacity.
func (c *historyCache) load(tx store.Tx, thread string) ([]store.Message, error) {
	prefix := c.get(thread)
	if len(prefix) == 0 {
		h, err := tx.History(thread)
		if err != nil {
			return nil, err
		}
		c.put(thread, h)
		return slices.Clip(h), nil
	}
	tail, err := tx.HistorySince(thread, prefix[len(prefix)-1].Seq)
	if err != nil || len(tail) == 0 {
		return prefix, err
	}
	return c.extend(thread, prefix, tail), nil
}

// extend appends tail to the cached history of thread, which was prefix
// when read, in place when the cached array has room: every slice handed
// out ends at or before its old length, so none of them sees the change.
func (c *historyCache) extend(thread string, prefix, tail []store.Message) []store.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[thread]
	if !ok || c.max < 0 {
		return append(prefix, tail...)
	}
	e := el.Value.(*historyEntry)
	if len(e.msgs) != len(prefix) {
		// Another reader extended it meanwhile; keep the longer one.
		h := append(prefix, tail...)
		if len(h) > len(e.msgs) {
			e.msgs = h
		}
		return slices.Clip(h)
	}
	e.msgs = append(e.msgs, tail...)
	return slices.Clip(e.msgs)
}

// saved adds to the thread's cached history the messages a slice has just
// committed after history (which it loaded), when they follow it directly
// (no other writer appended in between), so that the thread's next slice
// reads back only what was added since.
func (c *historyCache) saved(thread string, history, appended []store.Message) {
	if len(history) == 0 || len(appended) == 0 {
		return
	}
	for i, m := range appended {
		if m.Seq != history[len(history)-1].Seq+int64(i)+1 {
			return
		}
	}
	c.extend(thread, history, appended)
}

// arranged returns the model form of the settled prefix of the thread's
// history kept by setArranged, nil when none.
func (c *historyCache) arranged(thread string) *arranged {
	if c == nil || c.max < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[thread]; ok {
		return el.Value.(*historyEntry).arr
	}
	return nil
}

// setArranged keeps a as the model form of the settled prefix of the
// thread's history, when the thread's history is cached (a is worth
// nothing without it: it is found again only while the thread is active).
func (c *historyCache) setArranged(thread string, a *arranged) {
	if c == nil || c.max < 0 || a == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[thread]; ok {
		el.Value.(*historyEntry).arr = a
	}
}

// wire returns the thread's cache of encoded settled messages for
// requests that leave dropped images out (limitImages), nil when the
// thread's history is not cached (the encoding is then not kept). The
// settled messages read the same in every request that leaves out as many
// images, the oldest ones; a cache made for another number is replaced by
// an empty one.
func (c *historyCache) wire(thread string, dropped int) *model.WireCache {
	if c == nil || c.max < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[thread]
	if !ok {
		return nil
	}
	e := el.Value.(*historyEntry)
	if e.wire == nil || e.wireDropped != dropped {
		e.wire, e.wireDropped = &model.WireCache{}, dropped
	}
	return e.wire
}

// callIDUsed reports whether a call of the thread already has id (see
// the function callIDUsed): the cached part of history is looked up in an
// index extended as the history grows, the rest is scanned.
func (c *historyCache) callIDUsed(thread, id string, history []store.Message, pending []store.Call) bool {
	from := c.lookupCallID(thread, id, history)
	if from < 0 {
		return true
	}
	return callIDUsed(id, history, from, pending)
}

// lookupCallID returns -1 when id is a call id of the thread's cached
// history, else how much of history that index covers.
func (c *historyCache) lookupCallID(thread, id string, history []store.Message) int {
	if c == nil || c.max < 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[thread]
	if !ok {
		return 0
	}
	e := el.Value.(*historyEntry)
	// Histories are append-only, so e.msgs and history agree on their
	// common prefix; an index a little ahead of history is still right
	// (the ids it holds are the thread's).
	if e.ids == nil {
		e.ids = map[string]struct{}{}
	}
	for ; e.idsUpTo < min(len(history), len(e.msgs)); e.idsUpTo++ {
		for _, call := range e.msgs[e.idsUpTo].ToolCalls {
			e.ids[call.ID] = struct{}{}
		}
	}
	if _, ok := e.ids[id]; ok {
		return -1
	}
	return min(e.idsUpTo, len(history))
}

// callIDUsed reports whether a call of the thread already has id: a call
// in the history (every recorded call is in its turn; rejected and
// injected ones too) or a pending call. The history is scanned from
// history[from] on; the caller knows the part before.
func callIDUsed(id string, history []store.Message, from int, pending []store.Call) bool {
	for _, c := range pending {
		if c.CallID == id {
			return true
		}
	}
	for i := from; i < len(history); i++ {
		for _, c := range history[i].ToolCalls {
			if c.ID == id {
				return true
			}
		}
	}
	return false
}
