package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// A process listening for thread events is told, at
// commit, the thread and its last event id of every append; an append
// rolled back tells nothing.
func TestListenThreadEvents(t *testing.T) {
	s, err := postgres.Open(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th := "listen-" + uuid.NewString() // the channel is database-wide: other tests' threads may show
	type note struct {
		thread string
		last   int64
	}
	notes := make(chan note, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ListenThreadEvents(ctx, func(thread string, last int64) {
			if thread == th {
				notes <- note{thread, last}
			}
		})
	}()
	appendOne := func(fail bool) error {
		return s.Update(context.Background(), func(tx store.Tx) error {
			if _, err := tx.AppendThreadEvents([]store.ThreadEvent{{ThreadID: th, Type: "status", Data: json.RawMessage(`{}`)}}); err != nil {
				return err
			}
			if fail {
				return context.Canceled
			}
			return nil
		})
	}
	// The listener may not listen yet: append until a notification comes.
	var first note
	deadline := time.After(30 * time.Second)
wait:
	for {
		if err := appendOne(false); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-notes:
			break wait
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notification of appended events")
		}
	}
	for len(notes) > 0 { // notifications of earlier appends
		first = <-notes
	}
	if err := appendOne(true); err == nil {
		t.Fatal("the failing append committed")
	}
	if err := appendOne(false); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-notes:
		if n.last != first.last+1 {
			t.Errorf("after last id %d, a rolled back append and a committed one, the notification says %d; want %d", first.last, n.last, first.last+1)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notification of the committed append")
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("ListenThreadEvents returned nil when its context ended; want why it stopped")
	}
}
