package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// testThreads: CreateThread stores every field, fills a root's RootID with
// its own id and a child's RootID and UserID from its parent, refuses a
// duplicate id and an unknown parent; ListThreads is oldest first
// (Created, then ID); SetThreadStatus changes the status.
func testThreads(t *testing.T, s store.Store) {
	root := store.Thread{ID: "root", Status: store.ThreadActive, Created: at(0), UserID: "alice"}
	child := store.Thread{ID: "child", ParentID: "root", Status: store.ThreadActive, Created: at(time.Second),
		OriginCallID: "call-1", OriginTool: "spawn_thread", OriginArgs: json.RawMessage(`{"task":"x"}`), InheritSeq: 0}
	grand := store.Thread{ID: "grand", ParentID: "child", Status: store.ThreadActive, Created: at(2 * time.Second), UserID: "bob"}
	// RootID given, UserID not: the user still comes from the parent.
	sibling := store.Thread{ID: "sibling", ParentID: "root", RootID: "root", Status: store.ThreadActive, Created: at(3 * time.Second)}
	update(t, s, func(tx store.Tx) error {
		for _, th := range []store.Thread{root, child, grand, sibling} {
			if err := tx.CreateThread(th); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Thread("root")
		if err != nil {
			return err
		}
		if got.ID != "root" || got.ParentID != "" || got.RootID != "root" || got.Status != store.ThreadActive ||
			!got.Created.Equal(root.Created) || got.UserID != "alice" {
			t.Errorf("root thread read back as %+v; want RootID filled with its own id and every field as written", got)
		}
		got, err = tx.Thread("child")
		if err != nil {
			return err
		}
		if got.ParentID != "root" || got.RootID != "root" || got.UserID != "alice" || got.OriginCallID != "call-1" ||
			got.OriginTool != "spawn_thread" || !jsonEqual(got.OriginArgs, child.OriginArgs) || !got.Created.Equal(child.Created) {
			t.Errorf("child thread read back as %+v; want RootID and UserID from its parent and the origin as written", got)
		}
		got, err = tx.Thread("grand")
		if err != nil {
			return err
		}
		if got.RootID != "root" || got.UserID != "bob" {
			t.Errorf("grandchild read back with RootID %q, UserID %q; want the session's root and its own user", got.RootID, got.UserID)
		}
		got, err = tx.Thread("sibling")
		if err != nil {
			return err
		}
		if got.RootID != "root" || got.UserID != "alice" {
			t.Errorf("a child given its RootID but no UserID read back with RootID %q, UserID %q; want root and its parent's user alice", got.RootID, got.UserID)
		}
		return nil
	})

	// A duplicate id is an error, and the first thread is unchanged.
	err := s.Update(ctx(), func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "root", Status: store.ThreadClosed, Created: at(time.Hour)})
	})
	if err == nil {
		t.Errorf("CreateThread with an existing id succeeded; want an error")
	}

	// A child of a thread that does not exist is an error.
	if err := s.Update(ctx(), func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "orphan", ParentID: "ghost", Status: store.ThreadActive, Created: at(time.Hour)})
	}); err == nil {
		t.Errorf("CreateThread with an unknown parent succeeded; want an error")
	}

	// ListThreads: oldest first, ties broken by id.
	update(t, s, func(tx store.Tx) error {
		for _, id := range []string{"tie-b", "tie-a"} {
			if err := tx.CreateThread(store.Thread{ID: id, Status: store.ThreadActive, Created: at(time.Second)}); err != nil {
				return err
			}
		}
		return tx.SetThreadStatus("child", store.ThreadClosed)
	})
	view(t, s, func(tx store.Tx) error {
		all, err := tx.ListThreads()
		if err != nil {
			return err
		}
		if want := []string{"root", "child", "tie-a", "tie-b", "grand", "sibling"}; !slices.Equal(threadIDs(all), want) {
			t.Errorf("ListThreads = %v, want %v (by Created, then ID)", threadIDs(all), want)
		}
		got, err := tx.Thread("child")
		if err != nil {
			return err
		}
		if got.Status != store.ThreadClosed {
			t.Errorf("after SetThreadStatus(closed) the status is %q", got.Status)
		}
		if got, _ := tx.Thread("root"); got.Status != store.ThreadActive {
			t.Errorf("the failed duplicate CreateThread changed the first thread's status to %q", got.Status)
		}
		return nil
	})
}

// pageAll reads every page of size limit through page and returns the ids
// in order, failing on a page longer than limit.
func pageAll(t *testing.T, limit int, page func(after store.ThreadCursor) ([]store.Thread, error)) ([]string, error) {
	t.Helper()
	var ids []string
	var after store.ThreadCursor
	for range 100 {
		ths, err := page(after)
		if err != nil {
			return nil, err
		}
		if len(ths) > limit {
			t.Fatalf("a page of limit %d holds %d threads", limit, len(ths))
		}
		if len(ths) == 0 {
			return ids, nil
		}
		ids = append(ids, threadIDs(ths)...)
		after = store.CursorOf(ths[len(ths)-1])
	}
	t.Fatalf("paging did not end after 100 pages; got %v", ids)
	return nil, nil
}

// testThreadsPage: ThreadsPage walks ListThreads' order page by page from
// the zero cursor, threads created at the same instant included, and a
// cursor after the last thread gives an empty page.
func testThreadsPage(t *testing.T, s store.Store) {
	// Seven threads; four share one Created instant, inserted out of id order.
	update(t, s, func(tx store.Tx) error {
		for i, th := range []struct {
			id string
			d  time.Duration
		}{{"t5", 2}, {"t1", 0}, {"t4", 1}, {"t2", 1}, {"t3", 1}, {"t0", 1}, {"t6", 3}} {
			if err := tx.CreateThread(store.Thread{ID: th.id, Status: store.ThreadActive, Created: at(th.d * time.Millisecond)}); err != nil {
				return fmt.Errorf("thread %d: %w", i, err)
			}
		}
		return nil
	})
	want := []string{"t1", "t0", "t2", "t3", "t4", "t5", "t6"}
	view(t, s, func(tx store.Tx) error {
		all, err := tx.ListThreads()
		if err != nil {
			return err
		}
		if !slices.Equal(threadIDs(all), want) {
			t.Errorf("ListThreads = %v, want %v", threadIDs(all), want)
		}
		for _, limit := range []int{1, 2, 3, 7, 100} {
			ids, err := pageAll(t, limit, func(after store.ThreadCursor) ([]store.Thread, error) { return tx.ThreadsPage(after, limit) })
			if err != nil {
				return err
			}
			if !slices.Equal(ids, want) {
				t.Errorf("ThreadsPage with limit %d walked %v, want %v", limit, ids, want)
			}
		}
		// A cursor in the middle of the tie: after (1ms, t2) come t3, t4.
		page, err := tx.ThreadsPage(store.ThreadCursor{Created: at(time.Millisecond), ID: "t2"}, 2)
		if err != nil {
			return err
		}
		if got := threadIDs(page); !slices.Equal(got, []string{"t3", "t4"}) {
			t.Errorf("ThreadsPage after (1ms, t2) = %v, want [t3 t4]", got)
		}
		page, err = tx.ThreadsPage(store.ThreadCursor{Created: at(time.Hour), ID: "zzz"}, 10)
		if err != nil {
			return err
		}
		if len(page) != 0 {
			t.Errorf("ThreadsPage after the last thread = %v, want none", threadIDs(page))
		}
		return nil
	})
}

// testChildThreads: ChildThreads pages through one parent's direct
// children, oldest first, and never returns other threads.
func testChildThreads(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, th := range []store.Thread{
			{ID: "p", Created: at(0)},
			{ID: "q", Created: at(0)},
			{ID: "c3", ParentID: "p", Created: at(2 * time.Millisecond)},
			{ID: "c2", ParentID: "p", Created: at(time.Millisecond)},
			{ID: "c1", ParentID: "p", Created: at(time.Millisecond)},
			{ID: "qc", ParentID: "q", Created: at(time.Millisecond)},
			{ID: "gc", ParentID: "c1", Created: at(time.Millisecond)},
			{ID: "c4", ParentID: "p", Created: at(3 * time.Millisecond)},
		} {
			th.Status = store.ThreadActive
			if err := tx.CreateThread(th); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		want := []string{"c1", "c2", "c3", "c4"}
		for _, limit := range []int{1, 3, 10} {
			ids, err := pageAll(t, limit, func(after store.ThreadCursor) ([]store.Thread, error) { return tx.ChildThreads("p", after, limit) })
			if err != nil {
				return err
			}
			if !slices.Equal(ids, want) {
				t.Errorf("ChildThreads(p) with limit %d walked %v, want %v", limit, ids, want)
			}
		}
		for parent, want := range map[string][]string{"q": {"qc"}, "c1": {"gc"}, "c4": nil, "nobody": nil} {
			kids, err := tx.ChildThreads(parent, store.ThreadCursor{}, 10)
			if err != nil {
				return err
			}
			if got := threadIDs(kids); !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Errorf("ChildThreads(%s) = %v, want %v", parent, got, want)
			}
		}
		return nil
	})
}

// testUserThreadsPage: UserThreadsPage walks one user's threads, children
// (which take their parent's user) included, in ListThreads' order, and
// never another user's.
func testUserThreadsPage(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for i, th := range []store.Thread{
			{ID: "a1", UserID: "alice", Created: at(1 * time.Millisecond)},
			{ID: "b1", UserID: "bob", Created: at(2 * time.Millisecond)},
			{ID: "a2", UserID: "alice", Created: at(3 * time.Millisecond)},
			{ID: "a1c", ParentID: "a1", Created: at(3 * time.Millisecond)},
			{ID: "b1c", ParentID: "b1", Created: at(4 * time.Millisecond)},
			{ID: "n1", Created: at(5 * time.Millisecond)},
			{ID: "a3", UserID: "alice", Created: at(6 * time.Millisecond)},
		} {
			th.Status = store.ThreadActive
			if err := tx.CreateThread(th); err != nil {
				return fmt.Errorf("thread %d: %w", i, err)
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		for user, want := range map[string][]string{
			"alice": {"a1", "a1c", "a2", "a3"},
			"bob":   {"b1", "b1c"},
			"carol": nil,
		} {
			for _, limit := range []int{1, 2, 3, 100} {
				ids, err := pageAll(t, limit, func(after store.ThreadCursor) ([]store.Thread, error) {
					return tx.UserThreadsPage(user, after, limit)
				})
				if err != nil {
					return err
				}
				if !slices.Equal(ids, want) {
					t.Errorf("UserThreadsPage(%q) with limit %d walked %v, want %v", user, limit, ids, want)
				}
			}
		}
		return nil
	})
}
