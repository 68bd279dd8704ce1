package runtime

// This file owns the small pieces of forgetting a thread that is no longer
// in this runtime's store (it moved away): its cached history and its
// client streams.

// forgetThread drops the thread's cached history.
func (c *historyCache) forgetThread(thread string) {
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

// end ends every client stream of the thread, saying why.
func (h *hub) end(threadID, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[threadID] {
		s.mu.Lock()
		s.dropLocked(why)
		s.mu.Unlock()
		h.remove(threadID, s)
	}
}
