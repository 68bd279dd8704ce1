package postgres_test

import (
	"context"
	"testing"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
	"github.com/gorap/gorap/runtime/store/storetest"
)

// TestConformance runs the shared store conformance suite on a fresh schema
// per subtest.
func TestConformance(t *testing.T) {
	pgtest.Require(t)
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
