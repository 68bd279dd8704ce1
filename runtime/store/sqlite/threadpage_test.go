package sqlite

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// ThreadsPage walks every thread in ListThreads' order,
// page by page, and ChildThreads lists one parent's children, in order,
// page by page; threads created in the same nanosecond are ordered by id.
func TestThreadsPageAndChildren(t *testing.T) {
	s, _ := open(t)
	t0 := time.Unix(1700000000, 0).UTC()
	update(t, s, func(tx store.Tx) error {
		for i := range 25 {
			// Pairs share a creation time: the cursor must break ties by id.
			at := t0.Add(time.Duration(i/2) * time.Second)
			if err := tx.CreateThread(store.Thread{ID: fmt.Sprintf("r%02d", i), Created: at}); err != nil {
				return err
			}
		}
		for i := range 7 {
			at := t0.Add(time.Duration(100+i/3) * time.Second)
			if err := tx.CreateThread(store.Thread{ID: fmt.Sprintf("c%02d", i), ParentID: "r03", Created: at}); err != nil {
				return err
			}
		}
		return nil
	})
	var all, paged []string
	view(t, s, func(tx store.Tx) error {
		list, err := tx.ListThreads()
		for _, th := range list {
			all = append(all, th.ID)
		}
		return err
	})
	var after store.ThreadCursor
	for pages := 0; ; pages++ {
		var page []store.Thread
		view(t, s, func(tx store.Tx) (err error) { page, err = tx.ThreadsPage(after, 4); return })
		for _, th := range page {
			paged = append(paged, th.ID)
		}
		if len(page) < 4 {
			break
		}
		after = store.CursorOf(page[len(page)-1])
		if pages > 20 {
			t.Fatal("paging does not end")
		}
	}
	if !slices.Equal(all, paged) {
		t.Fatalf("paged = %v\nwant    %v", paged, all)
	}
	var kids []string
	after = store.ThreadCursor{}
	for {
		var page []store.Thread
		view(t, s, func(tx store.Tx) (err error) { page, err = tx.ChildThreads("r03", after, 3); return })
		for _, th := range page {
			kids = append(kids, th.ID)
		}
		if len(page) < 3 {
			break
		}
		after = store.CursorOf(page[len(page)-1])
	}
	if got := strings.Join(kids, ","); got != "c00,c01,c02,c03,c04,c05,c06" {
		t.Fatalf("children = %s", got)
	}
	view(t, s, func(tx store.Tx) error {
		none, err := tx.ChildThreads("r04", store.ThreadCursor{}, 10)
		if len(none) != 0 {
			t.Errorf("children of a childless thread: %v", none)
		}
		return err
	})
}

// The page and children queries, and those of FindThreads, use an index,
// not a scan of every thread; FindThreads reads each thread's root by
// its primary key.
func TestThreadsPageUsesIndex(t *testing.T) {
	s, _ := open(t)
	filter := []any{false, true, `["%a%"]`}
	for _, tc := range []struct {
		q    string
		args []any
	}{
		{threadsFirstPage, []any{10}},
		{threadsNextPage, []any{1, "a", 10, 1, 10, 10}},
		{childrenFirstPage, []any{"p", 10}},
		{childrenNextPage, []any{"p", 1, "a", 10, "p", 1, 10, 10}},
		{findAllFirst, append(slices.Clone(filter), 10)},
		{findAllNext, slices.Concat(filter, []any{1, "a", 10}, filter, []any{1, 10, 10})},
		{findChildrenFirst, slices.Concat([]any{"p"}, filter, []any{10})},
		{findChildrenNext, slices.Concat([]any{"p"}, filter, []any{1, "a", 10, "p"}, filter, []any{1, 10, 10})},
		{findUserFirst, slices.Concat([]any{"u"}, filter, []any{10})},
		{findUserNext, slices.Concat([]any{"u"}, filter, []any{1, "a", 10, "u"}, filter, []any{1, 10, 10})},
	} {
		q := tc.q
		plan := queryPlan(t, s.reader, q, tc.args...)
		p := strings.Join(plan, "; ")
		// Every access to threads goes through one of its indexes in
		// order (a LIMITed "SCAN ... USING INDEX" reads limit rows); only
		// the outer sort of a next page, of at most 2×limit rows, sorts.
		for _, d := range plan {
			thread := strings.Contains(d, "threads") || strings.HasPrefix(d, "SCAN t ") || strings.HasPrefix(d, "SEARCH t ") || strings.HasPrefix(d, "SEARCH r ")
			if thread && !strings.Contains(d, "INDEX threads_") && !strings.Contains(d, "r USING INDEX sqlite_autoindex_threads_1 (id=?)") {
				t.Errorf("plan of %s:\n  %s\nwant index searches only", q, p)
			}
		}
		first := q == threadsFirstPage || q == childrenFirstPage || q == findAllFirst || q == findChildrenFirst || q == findUserFirst
		if first && strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of %s:\n  %s\nwant no sort", q, p)
		}
	}
}
