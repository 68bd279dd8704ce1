package model

import (
	"bytes"
	"slices"
	"sync"
)

// DefaultWireCacheBytes bounds the bytes one WireCache keeps when its
// Limit is zero.
const DefaultWireCacheBytes = 1 << 20

// WireCache keeps the wire form of a conversation's settled messages, so
// that a provider encodes each message once and sends the same bytes again
// in every later completion of the conversation. The
// runtime keeps one per thread with its history cache and passes it in
// Request.Wire; Request.Settled says how many leading messages can no
// longer change.
//
// A provider uses it through Prefix and Extend under Lock; what it stores
// is its own business, named by a key (the provider's wire format, model
// and options) so that another provider or configuration never reads it.
// The cache is bounded: past Limit bytes it stops growing and the rest of
// the conversation is encoded per completion, as without a cache.
type WireCache struct {
	mu sync.Mutex
	// Limit bounds the cached bytes; zero means DefaultWireCacheBytes.
	Limit int

	key  string
	seq  int64  // the caller's sequence number of the last message covered
	body []byte // the encodings of messages [0, len(ends)), each ends at ends[i]
	ends []int  // end offsets in body
	// starts holds, for each cached message (turn), the index of its
	// first message in the caller's list, or -1 when not known.
	starts []int
	// marks holds, for each cached message, the offset in its encoding
	// that the provider gave ExtendMarked, or -1.
	marks []int
	// head is the provider's encoding of the parts other than the
	// messages, made from system and tools.
	head   [][]byte
	system string
	tools  []ToolSpec
	// results holds the call id of every tool result in the caller's
	// messages [0, resultsUpTo), so that normalising a tail need not
	// search the whole history for an earlier copy of a result
	// (resultIndex).
	results     map[string]struct{}
	resultsUpTo int
}

// Lock locks the cache for a provider's use; Unlock releases it.
func (c *WireCache) Lock() { c.mu.Lock() }

// Unlock releases the cache.
func (c *WireCache) Unlock() { c.mu.Unlock() }

// Prefix returns the cached encodings of the first messages of a request
// whose first settled messages are settled, their last one at the caller's
// sequence number seq, as bytes and the end offset of each message in
// them. The cache is emptied first when it was written under another key
// or holds more than settled messages or a later sequence number than seq
// (the conversation is not the one it was filled from). The caller holds
// the lock and must not modify the bytes returned.
func (c *WireCache) Prefix(key string, settled int, seq int64) ([]byte, []int) {
	if c.key != key || len(c.ends) > settled || c.seq > seq {
		c.key, c.seq, c.body, c.ends, c.starts, c.marks, c.head, c.tools, c.system = key, 0, nil, nil, nil, nil, nil, nil, ""
		c.results, c.resultsUpTo = nil, 0
	}
	return c.body, c.ends
}

// Extend appends the encoding of the next message, the n-th with n the
// number of messages cached, which is settled up to the caller's sequence
// number seq. It reports false, caching nothing, when the limit is reached.
// The caller holds the lock.
func (c *WireCache) Extend(enc []byte, seq int64) bool { return c.ExtendFrom(enc, seq, -1) }

// ExtendFrom is Extend for a provider that encodes normalised turns: start
// is the index, in Request.Messages, of the turn's first message
// (NormalizeStarts), which Starts returns.
func (c *WireCache) ExtendFrom(enc []byte, seq int64, start int) bool {
	return c.ExtendMarked(enc, seq, start, -1)
}

// ExtendMarked is ExtendFrom with mark, an offset in enc that the provider
// gets back from Mark: the Anthropic provider marks where a cache
// breakpoint goes, so that the turn it caches can be sent as the
// breakpoint without being encoded again.
func (c *WireCache) ExtendMarked(enc []byte, seq int64, start, mark int) bool {
	if len(c.body)+len(enc) > c.limit() {
		return false
	}
	c.body = append(c.body, enc...)
	c.ends = append(c.ends, len(c.body))
	c.starts = append(c.starts, start)
	c.marks = append(c.marks, mark)
	c.seq = seq
	return true
}

// Mark returns the mark the cached message i was added with (-1 for none).
// The caller holds the lock.
func (c *WireCache) Mark(i int) int { return c.marks[i] }

// Starts returns the start of each cached turn as given to ExtendFrom
// (-1 where unknown), or nil when the cache holds another key's entries
// or a later sequence number than seq: a provider may then normalise only
// the turns from the last cached one on (NormalizeTail). The caller holds
// the lock and must not modify the slice.
func (c *WireCache) Starts(key string, seq int64) []int {
	if c.key != key || c.seq > seq {
		return nil
	}
	return c.starts
}

// Head returns the encoding the provider stored with SetHead for the
// same system prompt and tools, and whether there is one. The caller holds
// the lock.
func (c *WireCache) Head(system string, tools []ToolSpec) ([][]byte, bool) {
	if c.head == nil || c.system != system || !slices.EqualFunc(c.tools, tools, sameTool) {
		return nil, false
	}
	return c.head, true
}

// SetHead stores parts, the provider's encodings of the request parts
// other than the messages, made from system and tools. The caller holds
// the lock.
func (c *WireCache) SetHead(system string, tools []ToolSpec, parts ...[]byte) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > c.limit() {
		return
	}
	c.system, c.tools, c.head = system, slices.Clone(tools), parts
}

func sameTool(a, b ToolSpec) bool {
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema)
}

func (c *WireCache) limit() int {
	if c.Limit == 0 {
		return DefaultWireCacheBytes
	}
	return c.Limit
}

// Size is the number of bytes the cache holds.
func (c *WireCache) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.body)
	for _, p := range c.head {
		n += len(p)
	}
	for id := range c.results {
		n += len(id) + resultEntryBytes
	}
	return n
}

// resultEntryBytes is about what an entry of WireCache.results costs
// beside its key's bytes (string header and map slot).
const resultEntryBytes = 24

// resultIndex returns the call ids of the tool results in msgs[:upto],
// messages that can no longer change (upto is at most Request.Settled), in
// a set kept from one completion to the next: each call adds only the
// messages since the last. The caller holds the lock and must not modify
// the set.
func (c *WireCache) resultIndex(msgs []Message, upto int) map[string]struct{} {
	if c.results == nil || c.resultsUpTo > upto {
		c.results, c.resultsUpTo = map[string]struct{}{}, 0
	}
	for ; c.resultsUpTo < upto; c.resultsUpTo++ {
		for _, r := range msgs[c.resultsUpTo].ToolResults {
			c.results[r.CallID] = struct{}{}
		}
	}
	return c.results
}

// NormalizeCached normalises req's conversation for a provider that keeps
// its encoded turns in w (locked by the caller) under key, each added with
// ExtendFrom: when it can, only from the last cached turn on
// (NormalizeTail), so that a completion's work grows with the turns added
// since, not with the whole history. It returns the turns from turn base
// on, the number of stable turns, and the first message of each returned
// turn. When base > 0, w holds at least base turns and no more than
// stable, so Prefix keeps them. With w nil it is NormalizeStarts.
func NormalizeCached(req Request, w *WireCache, key string) (turns []Turn, base, stable int, starts []int, err error) {
	if w != nil {
		if cs := w.Starts(key, req.SettledSeq); len(cs) >= 2 && cs[len(cs)-2] >= 0 {
			kt := len(cs) - 1 // the last cached turn
			var earlier map[string]struct{}
			if from := cs[kt]; from >= 0 && from < req.Settled && from < len(req.Messages) {
				earlier = w.resultIndex(req.Messages, from)
			}
			turns, stable, starts, ok, err := normalizeTail(req.Messages, req.Settled, kt, cs[kt-1], cs[kt], earlier)
			if err != nil {
				return nil, 0, 0, nil, err
			}
			if ok && stable >= len(cs) {
				return turns, kt, stable, starts, nil
			}
		}
	}
	turns, stable, starts, err = NormalizeStarts(req.Messages, req.Settled)
	return turns, 0, stable, starts, err
}
