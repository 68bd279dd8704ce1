package postgres_test

import (
	"testing"

	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// Every process that opens a store derives the same store id, and a store
// in another schema another one: client event ids carry it.
func TestStoreIDSameForEveryOpenerOfOneSchema(t *testing.T) {
	u := pgtest.URL(t)
	a, b, other := open(t, u), open(t, u), open(t, pgtest.URL(t))
	if a.StoreID() == "" || len(a.StoreID()) != 12 {
		t.Fatalf("StoreID = %q, want 12 hex digits", a.StoreID())
	}
	if a.StoreID() != b.StoreID() {
		t.Errorf("two opens of one schema have store ids %q and %q", a.StoreID(), b.StoreID())
	}
	if a.StoreID() == other.StoreID() {
		t.Errorf("two schemas share the store id %q", a.StoreID())
	}
}
