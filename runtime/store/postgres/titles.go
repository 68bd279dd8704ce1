package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// findThreadCols is threadCols of the table aliased t.
const findThreadCols = `t.id, COALESCE(t.parent_id, ''), t.root_id, t.status, t.created, t.origin_call_id, t.origin_tool, t.origin_args, t.inherit_seq, t.user_id, t.title, t.first_message, t.archived`

// findQuery returns the query of FindThreads for a scope condition on
// the thread (t) with scopeArgs parameters, after a cursor or not: every
// thread joined with its session's root thread (r) and kept when the
// root's archived flag is one of two values (backend.ArchivedValues) and
// its search text matches every pattern of a text array
// (backend.SearchPatterns; none for an empty one). Its shape does not
// depend on the filter's values.
func findQuery(scope string, scopeArgs int, cursor bool) string {
	n := scopeArgs
	arg := func() string { n++; return "$" + strconv.Itoa(n) }
	q := `SELECT ` + findThreadCols + ` FROM threads t JOIN threads r ON r.id = t.root_id WHERE ` + scope +
		` AND r.archived IN (` + arg() + `, ` + arg() + `)` +
		` AND NOT EXISTS (SELECT 1 FROM unnest(` + arg() + `::text[]) AS w(p) WHERE r.search_text NOT LIKE w.p ESCAPE '\')`
	if cursor {
		q += ` AND (t.created, t.id) > (` + arg() + `, ` + arg() + `)`
	}
	return q + ` ORDER BY t.created, t.id LIMIT ` + arg()
}

// The queries of FindThreads: every thread, a parent's children, a
// user's threads; from the start or after a cursor.
var (
	findAll, findAllAfter           = findQuery("true", 0, false), findQuery("true", 0, true)
	findChildren, findChildrenAfter = findQuery("t.parent_id = $1", 1, false), findQuery("t.parent_id = $1", 1, true)
	findUser, findUserAfter         = findQuery("t.user_id = $1", 1, false), findQuery("t.user_id = $1", 1, true)
)

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
	a, b := backend.ArchivedValues(f.Archived)
	var args []any
	first, next := findAll, findAllAfter
	switch {
	case f.ParentID != "":
		first, next, args = findChildren, findChildrenAfter, []any{f.ParentID}
	case f.UserID != "":
		first, next, args = findUser, findUserAfter, []any{f.UserID}
	}
	args = append(args, a, b, patterns)
	query := first
	if !after.IsZero() {
		query = next
		args = append(args, after.Created, after.ID)
	}
	return collect(t, "find threads", scanThreadRows, query, append(args, limit)...)
}

// SetThreadTitle implements store.Threads.
func (t *tx) SetThreadTitle(id, title string) error {
	th, err := t.Thread(id)
	if err != nil {
		return err
	}
	if _, err := t.exec(`UPDATE threads SET title = $1, search_text = $2 WHERE id = $3`, bin(title), backend.SearchText(title, th.FirstMessage), id); err != nil {
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
	tag, err := t.exec(`UPDATE threads SET first_message = $1, search_text = $2 WHERE id = $3 AND first_message = ''::bytea`,
		bin(text), backend.SearchText(th.Title, text), id)
	if err != nil {
		return false, fmt.Errorf("set the first message of thread %s: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// SetThreadArchived implements store.Threads.
func (t *tx) SetThreadArchived(id string, archived bool) error {
	tag, err := t.exec(`UPDATE threads SET archived = $1 WHERE id = $2`, archived, id)
	if err != nil {
		return fmt.Errorf("set the archived flag of thread %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return backend.NotFound("thread", id)
	}
	return nil
}

// backfillBatch is how many threads one transaction of
// backfillFirstMessages derives.
const backfillBatch = 500

// backfillFirstMessages derives the first_message (and search_text) of
// every thread that has none yet (NULL: it is older than the column, or
// a process of an older release created it): the start of its first
// user message for a root thread, from its history or else its inbox
// (store.FirstMessageOf), "" for a child. Open runs it after the
// migrations, in transactions of backfillBatch threads that hold the
// migration lock, so that processes starting together do it once; when
// every thread has one it costs one lookup in an empty index.
func (s *Store) backfillFirstMessages(ctx context.Context) error {
	for {
		n, err := s.backfillFirstMessagesOnce(ctx)
		if err != nil {
			return fmt.Errorf("postgres store %s: derive the first messages of sessions: %w", s.where, err)
		}
		if n < backfillBatch {
			return nil
		}
	}
}

// backfillFirstMessagesOnce derives the first message of up to
// backfillBatch threads in one transaction and reports how many.
func (s *Store) backfillFirstMessagesOnce(ctx context.Context) (int, error) {
	t, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer t.Rollback(context.WithoutCancel(ctx))
	if _, err := t.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return 0, err
	}
	type row struct {
		id, parent string
		title      []byte
	}
	rows, err := t.Query(ctx, `SELECT id, COALESCE(parent_id, ''), title FROM threads WHERE first_message IS NULL LIMIT $1`, backfillBatch)
	if err != nil {
		return 0, err
	}
	todo, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var v row
		err := r.Scan(&v.id, &v.parent, &v.title)
		return v, err
	})
	if err != nil {
		return 0, err
	}
	for _, r := range todo {
		first := ""
		if r.parent == "" {
			if first, err = firstUserText(ctx, t, r.id); err != nil {
				return 0, fmt.Errorf("session %s: %w", r.id, err)
			}
		}
		first = store.FirstMessageOf(first)
		if _, err := t.Exec(ctx, `UPDATE threads SET first_message = $1, search_text = $2 WHERE id = $3`,
			bin(first), backend.SearchText(string(r.title), first), r.id); err != nil {
			return 0, fmt.Errorf("session %s: %w", r.id, err)
		}
	}
	return len(todo), t.Commit(ctx)
}

// firstUserText returns the text of a root thread's first user message:
// from its history, or else its inbox; "" when it has none.
func firstUserText(ctx context.Context, t pgx.Tx, id string) (string, error) {
	var text []byte
	err := t.QueryRow(ctx, `SELECT text FROM messages WHERE thread_id = $1 AND role = $2 ORDER BY seq LIMIT 1`, id, string(store.RoleUser)).Scan(&text)
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return string(text), err
	}
	var payload []byte
	err = t.QueryRow(ctx, `SELECT payload FROM inbox WHERE thread_id = $1 AND kind = $2 ORDER BY id LIMIT 1`, id, string(store.KindUserMessage)).Scan(&payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var m store.UserMessage
	if json.Unmarshal(payload, &m) != nil {
		return "", nil // not a message a person can read: no title from it
	}
	return m.Text, nil
}
