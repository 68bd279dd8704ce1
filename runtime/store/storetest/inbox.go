package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

func item(thread, key string, kind store.InboxKind, payload string) store.InboxItem {
	return store.InboxItem{ThreadID: thread, Kind: kind, Payload: json.RawMessage(payload), DedupKey: key, Created: at(time.Second)}
}

// enqueue enqueues items in one Update and returns what Enqueue reported.
func enqueue(t *testing.T, s store.Store, items ...store.InboxItem) []bool {
	t.Helper()
	added := make([]bool, len(items))
	update(t, s, func(tx store.Tx) error {
		for i, it := range items {
			ok, err := tx.Enqueue(it)
			if err != nil {
				return fmt.Errorf("Enqueue %s: %w", it.DedupKey, err)
			}
			added[i] = ok
		}
		return nil
	})
	return added
}

func queued(t *testing.T, s store.Store, thread string) []store.InboxItem {
	t.Helper()
	var out []store.InboxItem
	view(t, s, func(tx store.Tx) error {
		var err error
		out, err = tx.Queued(thread)
		return err
	})
	return out
}

func keys(items []store.InboxItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.DedupKey
	}
	return out
}

// testInbox: Enqueue assigns increasing ids; Queued returns a thread's
// unconsumed items oldest first with every field; QueuedThreads lists the
// threads that have some; Consume removes items, ignores unknown ids and is
// idempotent.
func testInbox(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b", "c")
	enqueue(t, s,
		item("a", "a1", store.KindUserMessage, `{"text":"hi"}`),
		item("b", "b1", store.KindWake, `null`),
		item("a", "a2", store.KindToolResult, `{"call_id":"c1","text":"ok"}`),
	)
	enqueue(t, s, item("a", "a3", store.KindChildReport, `{"child_id":"x","report":"done"}`))
	qa := queued(t, s, "a")
	if got := keys(qa); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("Queued(a) = %v, want [a1 a2 a3]", got)
	}
	for i, it := range qa {
		if it.ThreadID != "a" || !it.Created.Equal(at(time.Second)) || (i > 0 && it.ID <= qa[i-1].ID) {
			t.Errorf("Queued(a)[%d] = %+v; want thread a, Created as written, ids increasing", i, it)
		}
	}
	if qa[0].Kind != store.KindUserMessage || !jsonEqual(qa[0].Payload, []byte(`{"text":"hi"}`)) ||
		qa[1].Kind != store.KindToolResult || !jsonEqual(qa[1].Payload, []byte(`{"call_id":"c1","text":"ok"}`)) {
		t.Errorf("Queued(a) kinds and payloads = %+v", qa)
	}
	if qc := queued(t, s, "c"); len(qc) != 0 {
		t.Errorf("Queued of a thread with nothing queued = %v", keys(qc))
	}
	view(t, s, func(tx store.Tx) error {
		ids, err := tx.QueuedThreads()
		if err != nil {
			return err
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"a", "b"}) {
			t.Errorf("QueuedThreads = %v, want a and b", ids)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.Consume([]int64{qa[0].ID, qa[2].ID}) })
	if got := keys(queued(t, s, "a")); !slices.Equal(got, []string{"a2"}) {
		t.Errorf("after consuming a1 and a3, Queued(a) = %v, want [a2]", got)
	}
	// Consume again, or an unknown id: ErrConsumed, no change; an empty
	// batch: no error.
	for _, ids := range [][]int64{{qa[0].ID, qa[2].ID}, {qa[1].ID, 1 << 40}} {
		err := s.Update(ctx(), func(tx store.Tx) error { return tx.Consume(ids) })
		if !errors.Is(err, store.ErrConsumed) {
			t.Errorf("Consume of consumed or unknown ids %v: %v, want an error wrapping store.ErrConsumed", ids, err)
		}
	}
	update(t, s, func(tx store.Tx) error { return tx.Consume(nil) })
	if got := keys(queued(t, s, "a")); !slices.Equal(got, []string{"a2"}) {
		t.Errorf("after a repeated Consume, Queued(a) = %v, want [a2]", got)
	}
	bs := queued(t, s, "b")
	update(t, s, func(tx store.Tx) error { return tx.Consume([]int64{qa[1].ID, bs[0].ID}) })
	view(t, s, func(tx store.Tx) error {
		ids, err := tx.QueuedThreads()
		if err != nil {
			return err
		}
		if len(ids) != 0 {
			t.Errorf("QueuedThreads with every item consumed = %v", ids)
		}
		return nil
	})
	// Ids keep increasing after consumption.
	enqueue(t, s, item("a", "a4", store.KindNote, `{"text":"n"}`))
	if q := queued(t, s, "a"); len(q) != 1 || q[0].ID <= qa[2].ID {
		t.Errorf("an item enqueued after consumption got id %v, want one above %d", q, qa[2].ID)
	}
}

// testInboxDedupKeys: a dedup key ever enqueued (or marked seen) makes
// every later Enqueue of it a no-op, for any thread, even after the item
// was consumed and within one transaction (RAP RE-6); a rolled-back
// Enqueue leaves its key unseen.
func testInboxDedupKeys(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	added := enqueue(t, s,
		item("a", "k1", store.KindUserMessage, `{"text":"first"}`),
		item("a", "k1", store.KindUserMessage, `{"text":"again"}`),
		item("b", "k1", store.KindUserMessage, `{"text":"other thread"}`),
	)
	if !slices.Equal(added, []bool{true, false, false}) {
		t.Errorf("Enqueue of one key three times in one transaction reported %v, want [true false false]", added)
	}
	q := queued(t, s, "a")
	if len(q) != 1 || !jsonEqual(q[0].Payload, []byte(`{"text":"first"}`)) || len(queued(t, s, "b")) != 0 {
		t.Fatalf("after duplicate enqueues, Queued(a) = %+v, Queued(b) = %v; want only the first", q, keys(queued(t, s, "b")))
	}
	update(t, s, func(tx store.Tx) error { return tx.Consume([]int64{q[0].ID}) })
	if added := enqueue(t, s, item("a", "k1", store.KindUserMessage, `{"text":"late"}`)); added[0] {
		t.Errorf("Enqueue of a consumed item's key added it again; its key must stay seen")
	}
	view(t, s, func(tx store.Tx) error {
		for key, want := range map[string]bool{"k1": true, "never": false} {
			if seen, err := tx.SeenKey(key); err != nil || seen != want {
				t.Errorf("SeenKey(%s) = %v, %v; want %v", key, seen, err, want)
			}
		}
		return nil
	})
	// MarkKeySeen: true the first time, false after; the key then blocks Enqueue.
	update(t, s, func(tx store.Tx) error {
		first, err := tx.MarkKeySeen("b", "m1")
		if err != nil {
			return err
		}
		second, err := tx.MarkKeySeen("b", "m1")
		if err != nil {
			return err
		}
		again, err := tx.MarkKeySeen("a", "k1")
		if err != nil {
			return err
		}
		if !first || second || again {
			t.Errorf("MarkKeySeen of a new key, the same key, an enqueued key = %v, %v, %v; want true, false, false", first, second, again)
		}
		return nil
	})
	if added := enqueue(t, s, item("b", "m1", store.KindUserMessage, `{"text":"x"}`)); added[0] || len(queued(t, s, "b")) != 0 {
		t.Errorf("Enqueue of a key marked seen added an item")
	}
	// A rolled-back Enqueue leaves its key unseen.
	s.Update(ctx(), func(tx store.Tx) error {
		if _, err := tx.Enqueue(item("a", "rolled", store.KindUserMessage, `{"text":"r"}`)); err != nil {
			return err
		}
		if _, err := tx.MarkKeySeen("a", "rolled-mark"); err != nil {
			return err
		}
		return errRollback
	})
	view(t, s, func(tx store.Tx) error {
		for _, key := range []string{"rolled", "rolled-mark"} {
			if seen, err := tx.SeenKey(key); err != nil || seen {
				t.Errorf("SeenKey(%s) after a rolled-back Update = %v, %v; want false", key, seen, err)
			}
		}
		return nil
	})
	if added := enqueue(t, s, item("a", "rolled", store.KindUserMessage, `{"text":"r"}`)); !added[0] {
		t.Errorf("Enqueue of a key whose first Enqueue was rolled back was refused")
	}
}

// testInboxOnce: an item marked Once is added and its key is not marked
// seen; while it is queued another item with its key (Once or not) is not
// added, and once it is consumed the key is free (the caller's own
// transaction makes such items unique: store.InboxItem.Once).
func testInboxOnce(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	once := func(key, text string) store.InboxItem {
		it := item("a", key, store.KindToolResult, `{"text":"`+text+`"}`)
		it.Once = true
		return it
	}
	added := enqueue(t, s, once("r1", "first"), once("r1", "again"))
	if !slices.Equal(added, []bool{true, false}) {
		t.Errorf("Enqueue of a Once item, then of its key again while it is queued, reported %v, want [true false]", added)
	}
	view(t, s, func(tx store.Tx) error {
		if seen, err := tx.SeenKey("r1"); err != nil || seen {
			t.Errorf("SeenKey of a Once item's key = %v, %v; want false (it is not recorded)", seen, err)
		}
		return nil
	})
	if added := enqueue(t, s, item("a", "r1", store.KindUserMessage, `{"text":"plain"}`)); added[0] {
		t.Errorf("Enqueue of the key of a queued Once item added it")
	}
	q := queued(t, s, "a")
	if len(q) != 1 || !jsonEqual(q[0].Payload, []byte(`{"text":"first"}`)) || q[0].Kind != store.KindToolResult {
		t.Fatalf("Queued(a) = %+v, want only the first Once item", q)
	}
	update(t, s, func(tx store.Tx) error { return tx.Consume([]int64{q[0].ID}) })
	if added := enqueue(t, s, once("r1", "later")); !added[0] {
		t.Errorf("Enqueue of a consumed Once item's key was refused; the key is not kept")
	}
}
