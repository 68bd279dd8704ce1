package runtime

import (
	"testing"

	"github.com/google/uuid"
)

// The runtime gives threads time-ordered ids
// (store.NewThreadID), so that creating them appends to the store's
// indexes; with random ids the cost of creating a thread grew with the
// number of threads already stored.
func TestCreateThreadGivesTimeOrderedIDs(t *testing.T) {
	e := newEnv(t, envOptions{})
	prev := ""
	for i := range 5 {
		id := e.newThread()
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("thread %d has id %q, not a UUID: %v", i, id, err)
		}
		if u.Version() != 7 {
			t.Fatalf("thread %d has id %q, UUID version %d; want 7 (time-ordered, see store.NewThreadID)", i, id, u.Version())
		}
		if id <= prev {
			t.Fatalf("thread %d has id %q, which sorts before the previous thread's %q", i, id, prev)
		}
		prev = id
	}
}
