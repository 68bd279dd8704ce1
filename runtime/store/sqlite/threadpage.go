package sqlite

import "github.com/gorap/gorap/runtime/store"

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
