package sqlite

import (
	"fmt"

	"github.com/gorap/gorap/runtime/store"
)

// ThreadsPage implements store.Threads with the threads_created index.
func (t *tx) ThreadsPage(after store.ThreadCursor, limit int) ([]store.Thread, error) {
	if after.IsZero() {
		return t.threadRows("list threads", `SELECT `+threadCols+` FROM threads ORDER BY created, id LIMIT ?`, limit)
	}
	return t.threadRows("list threads", `SELECT `+threadCols+` FROM threads WHERE (created, id) > (?, ?) ORDER BY created, id LIMIT ?`,
		nanos(after.Created), after.ID, limit)
}

// ChildThreads implements store.Threads with the threads_parent_created
// index.
func (t *tx) ChildThreads(parentID string, after store.ThreadCursor, limit int) ([]store.Thread, error) {
	what := "list the children of thread " + parentID
	if after.IsZero() {
		return t.threadRows(what, `SELECT `+threadCols+` FROM threads WHERE parent_id = ? ORDER BY created, id LIMIT ?`, parentID, limit)
	}
	return t.threadRows(what, `SELECT `+threadCols+` FROM threads WHERE parent_id = ? AND (created, id) > (?, ?) ORDER BY created, id LIMIT ?`,
		parentID, nanos(after.Created), after.ID, limit)
}

// threadRows runs a query of threadCols rows.
func (t *tx) threadRows(what, query string, args ...any) ([]store.Thread, error) {
	rows, err := t.tx.Query(query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Thread
	for rows.Next() {
		th, err := scanThread(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, th)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
