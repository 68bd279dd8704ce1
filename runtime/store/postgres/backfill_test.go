package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// Open derives the first message of every thread that has none yet
// (first_message NULL: older than the column, or written by a process of
// an older release), in batches, from the first user message of its
// history (a NUL byte or invalid UTF-8 in it included) or else of its
// inbox, keeping a title; a thread without a user message and a child
// get "". Two processes opening at once both succeed.
func TestOpenDerivesMissingFirstMessages(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	const n = 503 // more than one batch
	err = s.Update(ctx, func(tx store.Tx) error {
		for i := range n {
			id := fmt.Sprintf("s%04d", i)
			if err := tx.CreateThread(store.Thread{ID: id}); err != nil {
				return err
			}
			switch i % 3 {
			case 0:
				if _, err := tx.AppendMessages(id, []store.Message{{Role: store.RoleUser, Text: "history\x00 \xff" + id}}); err != nil {
					return err
				}
			case 1:
				payload, _ := json.Marshal(store.UserMessage{Text: "queued " + id})
				if _, err := tx.Enqueue(store.InboxItem{ThreadID: id, Kind: store.KindUserMessage, Payload: payload, DedupKey: "k" + id}); err != nil {
					return err
				}
			}
		}
		if err := tx.SetThreadTitle("s0001", "Kept title"); err != nil {
			return err
		}
		return tx.CreateThread(store.Thread{ID: "child", ParentID: "s0000"})
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	pc, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE threads SET first_message = NULL, search_text = ''`); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 2)
	for range 2 {
		go func() {
			s, err := postgres.Open(ctx, u)
			if err == nil {
				s.Close()
			}
			opened <- err
		}()
	}
	for range 2 {
		if err := <-opened; err != nil {
			t.Fatalf("Open of a database with threads lacking their first message: %v", err)
		}
	}
	s, err = postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(ctx, func(tx store.Tx) error {
		for i := range n {
			id := fmt.Sprintf("s%04d", i)
			want := map[int]string{0: "history\x00 \xff" + id, 1: "queued " + id, 2: ""}[i%3]
			want = store.FirstMessageOf(want)
			th, err := tx.Thread(id)
			if err != nil {
				return err
			}
			if th.FirstMessage != want {
				t.Fatalf("thread %s has first message %q after Open, want %q", id, th.FirstMessage, want)
			}
		}
		if th, _ := tx.Thread("child"); th.FirstMessage != "" {
			t.Errorf("a child thread got first message %q", th.FirstMessage)
		}
		for q, want := range map[string][]string{"KEPT s0001": {"s0001"}, "history s0003": {"s0003"}} {
			found, err := tx.FindThreads(store.ThreadFilter{Search: q}, store.ThreadCursor{}, 10)
			if err != nil {
				return err
			}
			var got []string
			for _, th := range found {
				got = append(got, th.ID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("a search for %q after Open found %v, want %v", q, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var unset int
	if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM threads WHERE first_message IS NULL`).Scan(&unset); err != nil || unset != 0 {
		t.Errorf("%d threads without a first message after Open (%v)", unset, err)
	}
}
