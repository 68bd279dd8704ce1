package sqlite

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// The page queries. After a cursor (c, i) each makes two index seeks,
// (created = c, id > i) then (created > c), and sorts at most 2×limit rows:
// a row value comparison (created, id) > (c, i) would scan every thread
// created at c.
const (
	threadsFirstPage = `SELECT ` + threadCols + ` FROM threads ORDER BY created, id LIMIT ?`
	threadsNextPage  = `SELECT * FROM (
		SELECT * FROM (SELECT ` + threadCols + ` FROM threads WHERE created = ? AND id > ? ORDER BY id LIMIT ?)
		UNION ALL
		SELECT * FROM (SELECT ` + threadCols + ` FROM threads WHERE created > ? ORDER BY created, id LIMIT ?)
	) ORDER BY 5, 1 LIMIT ?`
	userFirstPage = `SELECT ` + threadCols + ` FROM threads WHERE user_id = ? ORDER BY created, id LIMIT ?`
	userNextPage  = `SELECT * FROM (
		SELECT * FROM (SELECT ` + threadCols + ` FROM threads WHERE user_id = ? AND created = ? AND id > ? ORDER BY id LIMIT ?)
		UNION ALL
		SELECT * FROM (SELECT ` + threadCols + ` FROM threads WHERE user_id = ? AND created > ? ORDER BY created, id LIMIT ?)
	) ORDER BY 5, 1 LIMIT ?`
	childrenFirstPage = `SELECT ` + threadCols + ` FROM threads WHERE parent_id = ? ORDER BY created, id LIMIT ?`
	childrenNextPage  = `SELECT * FROM (
		SELECT * FROM (SELECT ` + threadCols + ` FROM threads WHERE parent_id = ? AND created = ? AND id > ? ORDER BY id LIMIT ?)
		UNION ALL
		SELECT * FROM (SELECT ` + threadCols + ` FROM threads WHERE parent_id = ? AND created > ? ORDER BY created, id LIMIT ?)
	) ORDER BY 5, 1 LIMIT ?`
)

// ThreadsPage implements store.Threads with the threads_created index.
func (t *tx) ThreadsPage(after store.ThreadCursor, limit int) ([]store.Thread, error) {
	if after.IsZero() {
		return collect(t, "list threads", scanThread, threadsFirstPage, limit)
	}
	c := nanos(after.Created)
	return collect(t, "list threads", scanThread, threadsNextPage, c, after.ID, limit, c, limit, limit)
}

// ChildThreads implements store.Threads with the threads_parent_created
// index.
func (t *tx) ChildThreads(parentID string, after store.ThreadCursor, limit int) ([]store.Thread, error) {
	what := "list the children of thread " + parentID
	if after.IsZero() {
		return collect(t, what, scanThread, childrenFirstPage, parentID, limit)
	}
	c := nanos(after.Created)
	return collect(t, what, scanThread, childrenNextPage, parentID, c, after.ID, limit, parentID, c, limit, limit)
}

// UserThreadsPage implements store.Threads with the threads_user_created
// index.
func (t *tx) UserThreadsPage(userID string, after store.ThreadCursor, limit int) ([]store.Thread, error) {
	what := "list the threads of a user"
	if after.IsZero() {
		return collect(t, what, scanThread, userFirstPage, userID, limit)
	}
	c := nanos(after.Created)
	return collect(t, what, scanThread, userNextPage, userID, c, after.ID, limit, userID, c, limit, limit)
}

// The queries of FindThreads: every thread (all), a parent's children or
// a user's threads, each joined with its session's root thread (r) and
// kept when the root's archived flag is one of two values
// (backend.ArchivedValues) and its search text matches every pattern of
// a JSON array (backend.SearchPatterns; none for '[]'). Their shape does
// not depend on the filter, so the statement cache holds six of them.
// After a cursor each makes the two index seeks of the page queries.
var (
	findAllFirst, findAllNext           = findQueries("1 = 1")
	findChildrenFirst, findChildrenNext = findQueries("t.parent_id = ?")
	findUserFirst, findUserNext         = findQueries("t.user_id = ?")
)

// findThreadCols is threadCols of the table aliased t.
const findThreadCols = `t.id, COALESCE(t.parent_id, ''), t.root_id, t.status, t.created, t.origin_call_id, t.origin_tool, COALESCE(t.origin_args, ''), t.inherit_seq, t.user_id, t.title, COALESCE(t.first_message, ''), t.archived`

// findQueries returns the first-page and next-page queries of FindThreads
// for a scope condition on the thread (t).
func findQueries(scope string) (first, next string) {
	from := `SELECT ` + findThreadCols + ` FROM threads t JOIN threads r ON r.id = t.root_id WHERE ` + scope +
		` AND r.archived IN (?, ?) AND NOT EXISTS (SELECT 1 FROM json_each(?) w WHERE r.search_text NOT LIKE w.value ESCAPE '\')`
	first = from + ` ORDER BY t.created, t.id LIMIT ?`
	next = `SELECT * FROM (
		SELECT * FROM (` + from + ` AND t.created = ? AND t.id > ? ORDER BY t.id LIMIT ?)
		UNION ALL
		SELECT * FROM (` + from + ` AND t.created > ? ORDER BY t.created, t.id LIMIT ?)
	) ORDER BY 5, 1 LIMIT ?`
	return first, next
}

// FindThreads implements store.Threads: the zero filter is ThreadsPage,
// ChildThreads or UserThreadsPage; any other walks the same index, joined
// with each thread's root.
func (t *tx) FindThreads(f store.ThreadFilter, after store.ThreadCursor, limit int) ([]store.Thread, error) {
	patterns := backend.SearchPatterns(f.Search)
	if len(patterns) == 0 && f.Archived == store.ArchivedIncluded {
		switch {
		case f.ParentID != "":
			return t.ChildThreads(f.ParentID, after, limit)
		case f.UserID != "":
			return t.UserThreadsPage(f.UserID, after, limit)
		}
		return t.ThreadsPage(after, limit)
	}
	words, err := json.Marshal(patterns)
	if err != nil {
		return nil, fmt.Errorf("find threads: %w", err)
	}
	a, b := backend.ArchivedValues(f.Archived)
	filter := []any{a, b, string(words)}
	var first, next string
	var scope []any
	switch {
	case f.ParentID != "":
		first, next, scope = findChildrenFirst, findChildrenNext, []any{f.ParentID}
	case f.UserID != "":
		first, next, scope = findUserFirst, findUserNext, []any{f.UserID}
	default:
		first, next = findAllFirst, findAllNext
	}
	where := append(slices.Clip(scope), filter...)
	if after.IsZero() {
		return collect(t, "find threads", scanThread, first, append(where, limit)...)
	}
	c := nanos(after.Created)
	args := append(slices.Clip(where), c, after.ID, limit)
	args = append(append(args, where...), c, limit, limit)
	return collect(t, "find threads", scanThread, next, args...)
}

// SetThreadTitle implements store.Threads.
func (t *tx) SetThreadTitle(id, title string) error {
	th, err := t.Thread(id)
	if err != nil {
		return err
	}
	if t.tx.rows != nil {
		t.tx.overlay.forget(id)
	}
	if _, err := t.tx.Exec(`UPDATE threads SET title = ?, search_text = ? WHERE id = ?`, title, backend.SearchText(title, th.FirstMessage), id); err != nil {
		return fmt.Errorf("set the title of thread %s: %w", id, err)
	}
	return nil
}

// SetFirstMessage implements store.Threads. A thread whose first_message
// is NULL (Open has not derived it yet) gets none here either.
func (t *tx) SetFirstMessage(id, text string) (bool, error) {
	th, err := t.Thread(id)
	if err != nil || th.FirstMessage != "" {
		return false, err
	}
	if t.tx.rows != nil {
		t.tx.overlay.forget(id)
	}
	res, err := t.tx.Exec(`UPDATE threads SET first_message = ?, search_text = ? WHERE id = ? AND first_message = ''`, text, backend.SearchText(th.Title, text), id)
	if err != nil {
		return false, fmt.Errorf("set the first message of thread %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// SetThreadArchived implements store.Threads.
func (t *tx) SetThreadArchived(id string, archived bool) error {
	if t.tx.rows != nil {
		t.tx.overlay.forget(id)
	}
	res, err := t.tx.Exec(`UPDATE threads SET archived = ? WHERE id = ?`, archived, id)
	if err != nil {
		return fmt.Errorf("set the archived flag of thread %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return backend.NotFound("thread", id)
	}
	return nil
}
