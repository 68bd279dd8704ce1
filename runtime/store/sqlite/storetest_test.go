package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/storetest"
)

// TestConformance runs the shared store conformance suite on a fresh database
// file per subtest.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(filepath.Join(t.TempDir(), "rap.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
