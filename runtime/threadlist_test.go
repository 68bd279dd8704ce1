package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/runtime/store"
)

// addThreads creates n threads under parent ("" for roots) directly in the
// store, one transaction.
func (e *env) addThreads(n int, parent, prefix string) {
	e.t.Helper()
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			if err := tx.CreateThread(store.Thread{ID: fmt.Sprintf("%s%05d", prefix, i), ParentID: parent}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

type listAnswer struct {
	Threads    []store.Thread `json:"threads"`
	NextCursor string         `json:"next_cursor"`
}

func getList(t *testing.T, base string, q url.Values) (int, listAnswer) {
	t.Helper()
	status, body := do(t, "GET", base+"/v1/threads?"+q.Encode(), "")
	var a listAnswer
	if status == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("list answer %s: %v", body, err)
		}
	}
	return status, a
}

// GET /v1/threads answers one page (100 by default, at
// most 1000) with an opaque next_cursor; following it lists every thread
// once, in order.
func TestListThreadsPaginated(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.addThreads(250, "", "t")
	status, first := getList(t, e.srv.URL, nil)
	if status != http.StatusOK || len(first.Threads) != 100 || first.NextCursor == "" {
		t.Fatalf("default page: status %d, %d threads, next_cursor %q; want 100 and a cursor", status, len(first.Threads), first.NextCursor)
	}
	var got []string
	cursor := ""
	for pages := 1; ; pages++ {
		q := url.Values{"limit": {"60"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		_, a := getList(t, e.srv.URL, q)
		for _, th := range a.Threads {
			got = append(got, th.ID)
		}
		if a.NextCursor == "" {
			break
		}
		if len(a.Threads) != 60 || pages > 10 {
			t.Fatalf("page %d: %d threads with a next cursor", pages, len(a.Threads))
		}
		cursor = a.NextCursor
	}
	all, err := e.rt.Threads(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, th := range all {
		want = append(want, th.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged listing (%d) differs from every thread (%d)", len(got), len(want))
	}
	if _, a := getList(t, e.srv.URL, url.Values{"limit": {"5000"}}); len(a.Threads) != 250 || a.NextCursor != "" {
		t.Fatalf("limit 5000: %d threads, cursor %q; want all 250 (the limit is clamped to 1000) and no cursor", len(a.Threads), a.NextCursor)
	}
	for _, q := range []url.Values{{"limit": {"0"}}, {"limit": {"x"}}, {"cursor": {"not-a-cursor"}}} {
		if status, _ := getList(t, e.srv.URL, q); status != http.StatusBadRequest {
			t.Errorf("%v: status %d, want 400", q, status)
		}
	}
}

// ?parent_id= lists one thread's children, and the status
// read lists at most 1000 of them with a cursor to the rest.
func TestThreadChildrenPaged(t *testing.T) {
	e := newEnv(t, envOptions{})
	parent := e.newThread()
	e.addThreads(1005, parent, "k")
	e.addThreads(3, "", "other")
	status, body := do(t, "GET", e.srv.URL+"/v1/threads/"+parent, "")
	var info struct {
		Children           []string `json:"children"`
		ChildrenNextCursor string   `json:"children_next_cursor"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &info) != nil {
		t.Fatalf("status read: %d %.200s", status, body)
	}
	if len(info.Children) != 1000 || info.ChildrenNextCursor == "" {
		t.Fatalf("status read: %d children, cursor %q; want 1000 and a cursor", len(info.Children), info.ChildrenNextCursor)
	}
	_, rest := getList(t, e.srv.URL, url.Values{"parent_id": {parent}, "cursor": {info.ChildrenNextCursor}})
	if len(rest.Threads) != 5 || rest.Threads[0].ID != "k01000" || rest.NextCursor != "" {
		t.Fatalf("the rest of the children: %d threads, cursor %q", len(rest.Threads), rest.NextCursor)
	}
	for _, th := range rest.Threads {
		if th.ParentID != parent {
			t.Fatalf("thread %s of parent %q listed as a child of %s", th.ID, th.ParentID, parent)
		}
	}
}

// A status read does not scan every thread (before, it
// listed them all to find the children: 0.4 s a read at 100,000 threads).
// The store is wrapped so that listing every thread during a status read
// fails the test; that the reads it does make use indexes is
// TestThreadsPageUsesIndex's part (runtime/store/sqlite).
func TestStatusReadIndexed(t *testing.T) {
	var reading atomic.Bool
	e := newEnv(t, envOptions{wrapStore: func(st store.Store) store.Store {
		return noFullList{Store: st, t: t, on: &reading}
	}})
	th := e.newThread()
	e.addThreads(200, "", "n")
	e.addThreads(3, th, "kid")
	reading.Store(true)
	defer reading.Store(false)
	for range 20 {
		if status, body := do(t, "GET", e.srv.URL+"/v1/threads/"+th, ""); status != http.StatusOK || !strings.Contains(body, "kid") {
			t.Fatalf("status read: %d %.300s", status, body)
		}
	}
}

// noFullList is a store whose ListThreads fails the test while on is set.
type noFullList struct {
	store.Store
	t  testing.TB
	on *atomic.Bool
}

func (s noFullList) wrap(fn func(store.Tx) error) func(store.Tx) error {
	return func(tx store.Tx) error { return fn(noFullListTx{Tx: tx, s: s}) }
}

func (s noFullList) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, s.wrap(fn))
}

func (s noFullList) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.View(ctx, s.wrap(fn))
}

func (s noFullList) QuickView(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.QuickView(ctx, s.wrap(fn))
}

type noFullListTx struct {
	store.Tx
	s noFullList
}

func (tx noFullListTx) ListThreads() ([]store.Thread, error) {
	if tx.s.on.Load() {
		tx.s.t.Errorf("a status read listed every thread of the store")
	}
	return tx.Tx.ListThreads()
}
