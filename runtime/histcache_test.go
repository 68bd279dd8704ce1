package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// The history cache returns the same history as a full read after writes
// made by anyone, hands out slices that appending cannot corrupt, and
// drops the least recently used thread when full.
func TestHistoryCache(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	appendText := func(thread, text string) {
		must(st.Update(ctx, func(tx store.Tx) error {
			_, err := tx.AppendMessages(thread, []store.Message{{Role: store.RoleUser, Text: text}})
			return err
		}))
	}
	for _, id := range []string{"a", "b", "c"} {
		must(st.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: id}) }))
	}
	c := newHistoryCache(2)
	load := func(thread string) []store.Message {
		t.Helper()
		var h []store.Message
		must(st.View(ctx, func(tx store.Tx) error {
			var err error
			h, err = c.load(tx, thread)
			return err
		}))
		return h
	}
	full := func(thread string) string {
		var h []store.Message
		must(st.View(ctx, func(tx store.Tx) error {
			var err error
			h, err = tx.History(thread)
			return err
		}))
		return fmt.Sprint(h)
	}
	if h := load("a"); len(h) != 0 {
		t.Fatalf("empty thread: %v", h)
	}
	appendText("a", "a1")
	appendText("a", "a2")
	h := load("a")
	if fmt.Sprint(h) != full("a") || len(h) != 2 {
		t.Fatalf("first load = %v, want %s", h, full("a"))
	}
	// A caller appending to what it got must not write into the cache.
	_ = append(h, store.Message{Text: "local only"})
	appendText("a", "a3")
	if got := load("a"); fmt.Sprint(got) != full("a") || len(got) != 3 {
		t.Fatalf("after an append elsewhere = %v, want %s", got, full("a"))
	}
	// Capacity 2: using b and c drops a.
	appendText("b", "b1")
	appendText("c", "c1")
	load("b")
	load("c")
	if c.get("a") != nil || c.get("b") == nil || c.get("c") == nil {
		t.Fatalf("LRU: a=%v b=%v c=%v", c.get("a"), c.get("b"), c.get("c"))
	}
	appendText("a", "a4")
	if got := load("a"); fmt.Sprint(got) != full("a") || len(got) != 4 {
		t.Fatalf("reload after eviction = %v, want %s", got, full("a"))
	}
	// Turned off, it still loads correctly and keeps nothing.
	off := newHistoryCache(-1)
	must(st.View(ctx, func(tx store.Tx) error {
		got, err := off.load(tx, "a")
		if fmt.Sprint(got) != full("a") {
			t.Errorf("cache off: %v", got)
		}
		return err
	}))
	if off.get("a") != nil {
		t.Fatal("a disabled cache kept a history")
	}
}

// The call ids of a thread are found in its cached history (indexed as it
// grows), in messages beyond the cached part, and among pending calls;
// another thread's ids are not its own.
func TestHistoryCacheCallIDUsed(t *testing.T) {
	c := newHistoryCache(4)
	h := []store.Message{user("go"), asst("", "a1", "a2"), res("a1", "x")}
	c.put("t", h)
	pending := []store.Call{{CallID: "p1"}}
	for _, id := range []string{"a1", "a2", "p1"} {
		if !c.callIDUsed("t", id, h, pending) {
			t.Errorf("%s: not found", id)
		}
	}
	if c.callIDUsed("t", "b1", h, pending) || c.callIDUsed("other", "a1", nil, nil) {
		t.Error("an unused id was reported used")
	}
	// Appended after the cached part: scanned, then indexed once cached.
	h2 := append(slices.Clip(h), asst("", "b1"))
	if !c.callIDUsed("t", "b1", h2, nil) {
		t.Error("b1 beyond the cached part: not found")
	}
	c.put("t", h2)
	if !c.callIDUsed("t", "b1", h2, nil) || c.callIDUsed("t", "b2", h2, nil) {
		t.Error("after caching h2")
	}
	// Without a cache every lookup scans.
	var none *historyCache
	if !none.callIDUsed("t", "a2", h, nil) || none.callIDUsed("t", "zz", h, nil) {
		t.Error("nil cache")
	}
}

// A slice's own saved messages extend the cached history when they follow
// it directly, and not when another writer appended in between (the next
// slice then reads back only what is new).
func TestHistoryCacheSaved(t *testing.T) {
	c := newHistoryCache(8)
	msg := func(seq int64) store.Message { return store.Message{ThreadID: "t", Seq: seq, Role: store.RoleUser} }
	c.put("t", []store.Message{msg(1), msg(2)})
	h := c.get("t")
	c.saved("t", h, []store.Message{msg(4)}) // seq 3 was appended by someone else
	if got := len(c.get("t")); got != 2 {
		t.Fatalf("after a gap: %d messages cached; want 2", got)
	}
	c.saved("t", h, []store.Message{msg(3), msg(4)})
	got := c.get("t")
	if len(got) != 4 || got[3].Seq != 4 {
		t.Fatalf("after contiguous saves: %+v; want seqs 1-4", got)
	}
	if len(h) != 2 {
		t.Fatalf("the slice handed out before changed: %+v", h)
	}
	c.saved("u", []store.Message{msg(1)}, []store.Message{msg(2)}) // not cached: nothing to extend
	if c.get("u") != nil {
		t.Fatal("saved cached a thread that was not cached")
	}
}
