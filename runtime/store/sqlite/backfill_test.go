package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/store"
)

// A store of the previous release gets, at Open, the first message of
// each of its sessions from their histories (children none), and a
// search finds the sessions by it: sessions started before titles have
// one derived like any other.
func TestOpenDerivesFirstMessagesOfPreviousRelease(t *testing.T) {
	s, err := Open(copyFixture(t, "release-818f824.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	view(t, s, func(tx store.Tx) error {
		for id, want := range map[string]string{
			oldTokyo: "What time is it in Tokyo?", oldClock: "watch the clock tick",
			oldChild1: "", oldChild2: "", oldChild3: "",
		} {
			th, err := tx.Thread(id)
			if err != nil {
				return err
			}
			if th.FirstMessage != want {
				t.Errorf("thread %s has first message %q after Open, want %q", id, th.FirstMessage, want)
			}
		}
		found, err := tx.FindThreads(store.ThreadFilter{Search: "TOKYO"}, store.ThreadCursor{}, 10)
		if err != nil {
			return err
		}
		if got := threadIDs(found); !slices.Equal(got, []string{oldTokyo}) {
			t.Errorf("a search for the Tokyo question found %v, want [%s]", got, oldTokyo)
		}
		return nil
	})
}

// Open derives the first message of every thread that has none yet
// (first_message NULL), in batches, from the first user message of its
// history or else of its inbox, cut to store.MaxFirstMessage characters,
// keeping a title; a thread without a user message gets "", and a
// later SetFirstMessage records one.
func TestOpenDerivesMissingFirstMessages(t *testing.T) {
	s, path := open(t)
	n := backfillBatch + 3 // more than one batch
	long := strings.Repeat("é", store.MaxFirstMessage+40)
	update(t, s, func(tx store.Tx) error {
		for i := range n {
			id := fmt.Sprintf("s%04d", i)
			if err := tx.CreateThread(store.Thread{ID: id}); err != nil {
				return err
			}
			switch i % 4 {
			case 0: // in the history, after an assistant message
				if _, err := tx.AppendMessages(id, []store.Message{{Role: store.RoleAssistant, Text: "hi"}, {Role: store.RoleUser, Text: "  history " + id + "\nmore"}}); err != nil {
					return err
				}
			case 1: // queued only
				payload, _ := json.Marshal(store.UserMessage{Text: "queued " + id})
				if _, err := tx.Enqueue(store.InboxItem{ThreadID: id, Kind: store.KindUserMessage, Payload: payload, DedupKey: "k" + id}); err != nil {
					return err
				}
			case 2: // long
				if _, err := tx.AppendMessages(id, []store.Message{{Role: store.RoleUser, Text: long}}); err != nil {
					return err
				}
			}
		}
		if err := tx.SetThreadTitle("s0000", "Kept title"); err != nil {
			return err
		}
		return tx.CreateThread(store.Thread{ID: "child", ParentID: "s0000"})
	})
	if _, err := s.group.conn.ExecContext(context.Background(), `UPDATE threads SET first_message = NULL, search_text = ''`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	view(t, s, func(tx store.Tx) error {
		for i := range n {
			id := fmt.Sprintf("s%04d", i)
			want := map[int]string{0: "history " + id + "\nmore", 1: "queued " + id, 2: strings.Repeat("é", store.MaxFirstMessage)}[i%4]
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
		for q, want := range map[string][]string{"kept s0000": {"child", "s0000"}, "queued s0001": {"s0001"}} {
			found, err := tx.FindThreads(store.ThreadFilter{Search: q}, store.ThreadCursor{}, 10)
			if err != nil {
				return err
			}
			if got := threadIDs(found); !slices.Equal(got, want) {
				t.Errorf("a search for %q after Open found %v, want %v", q, got, want)
			}
		}
		return nil
	})
	var added bool
	update(t, s, func(tx store.Tx) error {
		var err error
		added, err = tx.SetFirstMessage("s0003", "now one")
		return err
	})
	if !added {
		t.Error("SetFirstMessage of a session that had no user message at Open added nothing")
	}
	var unset int
	if err := s.group.conn.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM threads WHERE first_message IS NULL`).Scan(&unset); err != nil || unset != 0 {
		t.Errorf("%d threads without a first message after Open (%v)", unset, err)
	}
}
