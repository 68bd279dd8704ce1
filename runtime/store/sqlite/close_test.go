package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// Close while writes are under way waits for the group being written: every
// Update that returned nil is in the store when it is opened again, every
// other one says why (the store was closed), Close itself reports no error,
// and an Update after Close is refused with store.ErrClosed.
func TestCloseDuringWrites(t *testing.T) {
	for round := range 5 {
		path := filepath.Join(t.TempDir(), "c.db")
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		const n = 400
		results := make([]error, n)
		var wg sync.WaitGroup
		started := make(chan struct{})
		var once sync.Once
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = s.Update(context.Background(), func(tx store.Tx) error {
					once.Do(func() { close(started) })
					return tx.CreateThread(store.Thread{ID: fmt.Sprintf("t%d", i), Status: store.ThreadActive})
				})
			}()
		}
		<-started
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close during writes: %v", round, err)
		}
		wg.Wait()
		if err := s.Update(context.Background(), func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Update after Close = %v, want store.ErrClosed", err)
		}
		if err := s.QuickView(context.Background(), func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("QuickView after Close = %v, want store.ErrClosed", err)
		}

		s, err = sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var threads []store.Thread
		if err := s.View(context.Background(), func(tx store.Tx) error {
			threads, err = tx.ListThreads()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		have := map[string]bool{}
		for _, th := range threads {
			have[th.ID] = true
		}
		ok, refused := 0, 0
		for i, err := range results {
			id := fmt.Sprintf("t%d", i)
			switch {
			case err == nil:
				ok++
				if !have[id] {
					t.Errorf("round %d: Update of %s returned nil but the thread is not in the store", round, id)
				}
			case errors.Is(err, store.ErrClosed):
				refused++
				if have[id] {
					t.Errorf("round %d: Update of %s was refused (%v) but the thread is in the store", round, id, err)
				}
			default:
				t.Errorf("round %d: Update of %s: %v; want nil or store.ErrClosed", round, id, err)
			}
		}
		t.Logf("round %d: %d committed, %d refused", round, ok, refused)
	}
}
