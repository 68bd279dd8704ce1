package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// listen runs s.ListenWakes until the test ends and returns the thread
// ids it reports, once it listens.
func listen(t *testing.T, s *postgres.Store) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	woken, ready, done := make(chan string, 16), make(chan struct{}), make(chan error, 1)
	go func() { done <- s.ListenWakes(ctx, func() { close(ready) }, func(id string) { woken <- id }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenWakes: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ListenWakes ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("ListenWakes did not listen within 30s")
	}
	return woken
}

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestListenWakes: an inbox row committed through one
// Store wakes the listeners of the other Stores on the schema, after the
// commit, with the thread's id; a rolled-back transaction wakes no one;
// a Store does not hear its own rows; another schema hears nothing.
func TestListenWakes(t *testing.T) {
	u := pgtest.URL(t)
	a, b := open(t, u), open(t, u)
	other := open(t, pgtest.URL(t))
	fromA, fromB, fromOther := listen(t, a), listen(t, b), listen(t, other)
	ctx := context.Background()
	th, rolledBack := store.NewThreadID(), store.NewThreadID()
	if err := a.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{th, rolledBack} {
			if err := tx.CreateThread(store.Thread{ID: id, RootID: id, Status: store.ThreadActive}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	enqueue := func(th, key string, fail bool) {
		err := a.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Enqueue(store.InboxItem{ThreadID: th, Kind: store.KindUserMessage, Payload: []byte(`{"text":"hi"}`), DedupKey: key}); err != nil {
				return err
			}
			if fail {
				return errors.New("roll back")
			}
			return nil
		})
		if (err != nil) != fail {
			t.Fatalf("enqueue %s: %v", key, err)
		}
	}
	enqueue(rolledBack, "rolled-back", true)
	enqueue(th, "committed", false)
	select {
	case id := <-fromB:
		if id != th {
			t.Fatalf("B woke %q first, want thread %s (the rolled-back thread is %s)", id, th, rolledBack)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("B was not woken within 30s of the commit")
	}
	// The one notification B got was the committed row's; the rolled-back
	// row sent none, A skips its own, the other schema hears nothing.
	// A second commit, seen by B, bounds the wait for strays.
	enqueue(th, "second", false)
	select {
	case <-fromB:
	case <-time.After(30 * time.Second):
		t.Fatal("B was not woken within 30s of the second commit")
	}
	for name, ch := range map[string]<-chan string{"B": fromB, "A": fromA, "the other schema": fromOther} {
		select {
		case id := <-ch:
			t.Errorf("%s was woken for %q, unexpectedly", name, id)
		default:
		}
	}
}
