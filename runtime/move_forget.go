package runtime

// This file owns what the engine's memory needs when a session's threads
// come back after they were forgotten here (a session moved away and
// moving back, a deleted session imported from its export).

// sessionMovedMessage is the text of the error event that ends the event
// streams of a session that moved to another runtime.
const sessionMovedMessage = "this session moved to another runtime: follow it there (the client API answers 308 with its address)"

// revive makes the threads ids live again for the hub: their events are
// published once more (see endThreads' tombstones).
func (h *hub) revive(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.gone, id)
	}
}
