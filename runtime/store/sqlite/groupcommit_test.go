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

// Concurrent Update calls share transactions (group commit), yet each is
// all-or-nothing on its own: a failing call loses only its own writes, and
// every call that returned nil is durable after a reopen.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Update(context.Background(), func(tx store.Tx) error {
				if err := tx.CreateThread(store.Thread{ID: fmt.Sprintf("t%d", i), Status: store.ThreadActive}); err != nil {
					return err
				}
				if i%7 == 0 {
					// A second write, then a failure: both must vanish.
					if err := tx.CreateThread(store.Thread{ID: fmt.Sprintf("t%d-extra", i), Status: store.ThreadActive}); err != nil {
						return err
					}
					return errBoom
				}
				return nil
			})
		}()
	}
	wg.Wait()
	// A duplicate id fails inside its savepoint without disturbing others.
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "t1", Status: store.ThreadActive})
	}); err == nil {
		t.Fatal("creating a duplicate thread succeeded")
	}
	// A cancelled context is refused before anything runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Update(ctx, func(store.Tx) error { t.Error("ran with a cancelled context"); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled context = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var threads []store.Thread
	if err := s.View(context.Background(), func(tx store.Tx) error {
		threads, err = tx.ListThreads()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, th := range threads {
		have[th.ID] = true
	}
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		switch {
		case i%7 == 0:
			if !errors.Is(results[i], errBoom) || have[id] || have[id+"-extra"] {
				t.Errorf("call %d: err %v, kept %v/%v; want errBoom and nothing kept", i, results[i], have[id], have[id+"-extra"])
			}
		default:
			if results[i] != nil || !have[id] {
				t.Errorf("call %d: err %v, kept %v; want nil and the thread kept", i, results[i], have[id])
			}
		}
	}
}
