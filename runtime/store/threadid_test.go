package store

import (
	"testing"

	"github.com/google/uuid"
)

// Thread ids are time-ordered, so that creating threads
// appends to the store's indexes instead of touching a random page of each
// (with random version 4 ids, 10× the threads took 15.6× the time in
// rap bench-idle). Ids made in a row must sort in the order they were
// made, even within one millisecond.
func TestNewThreadIDIsTimeOrdered(t *testing.T) {
	const n = 10_000
	seen := make(map[string]bool, n)
	prev := ""
	for i := range n {
		id := NewThreadID()
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("id %d %q is not a UUID: %v", i, id, err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("id %d %q is UUID version %d, variant %v; want version 7 (time-ordered), RFC 9562 variant", i, id, u.Version(), u.Variant())
		}
		if id != u.String() {
			t.Fatalf("id %d %q is not in the canonical lower-case form %q", i, id, u.String())
		}
		if seen[id] {
			t.Fatalf("id %d %q was returned twice", i, id)
		}
		seen[id] = true
		if id <= prev {
			t.Fatalf("id %d %q sorts before or equal to the id made before it, %q", i, id, prev)
		}
		prev = id
	}
}
