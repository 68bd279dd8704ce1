package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// TestListenersShareOneConnection: a Store's wake-up, client event and
// text delta listeners listen through one connection to the database,
// each hears its own channel, one that stops leaves the others hearing,
// and the connection closes when the last one stops.
func TestListenersShareOneConnection(t *testing.T) {
	app := fmt.Sprintf("listen_test_%d", time.Now().UnixNano())
	u := pgtest.URL(t) + "&application_name=" + app
	a, b := open(t, u), open(t, u)
	ctx := context.Background()
	th := store.NewThreadID()
	if err := b.Update(ctx, func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: th, RootID: th, Status: store.ThreadActive})
	}); err != nil {
		t.Fatal(err)
	}

	wakes, events, deltas := make(chan string, 16), make(chan string, 16), make(chan string, 16)
	type listener struct {
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name string, run func(ctx context.Context, ready func()) error) listener {
		lctx, cancel := context.WithCancel(ctx)
		l := listener{cancel, make(chan error, 1)}
		ready := make(chan struct{})
		var once bool
		go func() {
			l.done <- run(lctx, func() {
				if !once {
					once = true
					close(ready)
				}
			})
		}()
		select {
		case <-ready:
		case err := <-l.done:
			t.Fatalf("%s ended before listening: %v", name, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not listen within 30s", name)
		}
		return l
	}
	lw := start("wake-ups", func(ctx context.Context, ready func()) error {
		return a.ListenWakes(ctx, ready, func(id string) { wakes <- id })
	})
	ld := start("text deltas", func(ctx context.Context, ready func()) error {
		return a.ListenTextDeltas(ctx, ready, func(d store.TextDelta) { deltas <- d.Text })
	})
	le := start("events", func(ctx context.Context, ready func()) error {
		ready() // ListenThreadEvents tells no readiness; the other two share its connection
		return a.ListenThreadEvents(ctx, func(id string, _ int64) {
			if id == th {
				events <- id
			}
		})
	})

	conn := rawConn(t, u)
	listening := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitListening := func(want int) {
		deadline := time.Now().Add(30 * time.Second)
		for listening() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections of the store listen, want %d", listening(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitListening(1)

	wake := func(key string) {
		if err := b.Update(ctx, func(tx store.Tx) error {
			_, err := tx.Enqueue(store.InboxItem{ThreadID: th, Kind: store.KindUserMessage, Payload: []byte(`{"text":"hi"}`), DedupKey: key})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	event := func() {
		if err := b.Update(ctx, func(tx store.Tx) error {
			_, err := tx.AppendThreadEvents([]store.ThreadEvent{{ThreadID: th, Type: "status", Data: json.RawMessage(`{}`)}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	delta := func(text string) {
		if err := b.SendTextDeltas(ctx, []store.TextDelta{{ThreadID: th, Turn: "t1", Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	heard := func(what string, ch <-chan string, want string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("%s: heard %q, want %q", what, got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: heard nothing in 30s", what)
		}
	}
	wake("k1")
	heard("wake-up", wakes, th)
	event()
	heard("event", events, th)
	delta("hello")
	heard("text delta", deltas, "hello")

	ld.cancel()
	if err := <-ld.done; err != nil {
		t.Fatalf("the delta listener, stopped: %v", err)
	}
	wake("k2")
	heard("wake-up after the delta listener stopped", wakes, th)
	event()
	heard("event after the delta listener stopped", events, th)
	waitListening(1)

	lw.cancel()
	le.cancel()
	for _, l := range []listener{lw, le} {
		if err := <-l.done; err != nil && err != context.Canceled {
			t.Fatalf("a listener, stopped: %v", err)
		}
	}
	waitListening(0)
}
