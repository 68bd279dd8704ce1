package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// backfillBatch is how many threads one transaction of
// backfillFirstMessages derives.
const backfillBatch = 500

// backfillFirstMessages derives the first_message (and search_text) of
// every thread that has none yet (NULL: it is older than the column):
// the start of its first user message for a root thread, from its
// history or else its inbox (store.FirstMessageOf), "" for a child.
// Open runs it after the migrations, in transactions of backfillBatch
// threads; once every thread has one, it costs one lookup in an empty
// index.
func backfillFirstMessages(ctx context.Context, db *sql.DB) error {
	// A schema before the column (a test's) has nothing to derive.
	var has bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pragma_table_info('threads') WHERE name = 'first_message')`).Scan(&has); err != nil || !has {
		return err
	}
	for {
		n, err := backfillFirstMessagesOnce(ctx, db)
		if err != nil || n < backfillBatch {
			return err
		}
	}
}

// backfillFirstMessagesOnce derives the first message of up to
// backfillBatch threads in one transaction and reports how many.
func backfillFirstMessagesOnce(ctx context.Context, db *sql.DB) (int, error) {
	t, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("derive the first messages of sessions: %w", err)
	}
	defer t.Rollback()
	type row struct {
		id, parent, title string
	}
	var rows []row
	rs, err := t.QueryContext(ctx, `SELECT id, COALESCE(parent_id, ''), title FROM threads WHERE first_message IS NULL LIMIT ?`, backfillBatch)
	if err != nil {
		return 0, fmt.Errorf("derive the first messages of sessions: %w", err)
	}
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.id, &r.parent, &r.title); err != nil {
			rs.Close()
			return 0, fmt.Errorf("derive the first messages of sessions: %w", err)
		}
		rows = append(rows, r)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, fmt.Errorf("derive the first messages of sessions: %w", err)
	}
	for _, r := range rows {
		first := ""
		if r.parent == "" {
			if first, err = firstUserText(ctx, t, r.id); err != nil {
				return 0, fmt.Errorf("derive the first message of session %s: %w", r.id, err)
			}
		}
		first = store.FirstMessageOf(first)
		if _, err := t.ExecContext(ctx, `UPDATE threads SET first_message = ?, search_text = ? WHERE id = ?`, first, backend.SearchText(r.title, first), r.id); err != nil {
			return 0, fmt.Errorf("derive the first message of session %s: %w", r.id, err)
		}
	}
	return len(rows), t.Commit()
}

// firstUserText returns the text of a root thread's first user message:
// from its history, or else its inbox; "" when it has none.
func firstUserText(ctx context.Context, t *sql.Tx, id string) (string, error) {
	var text string
	err := t.QueryRowContext(ctx, `SELECT text FROM messages WHERE thread_id = ? AND role = ? ORDER BY seq LIMIT 1`, id, string(store.RoleUser)).Scan(&text)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return text, err
	}
	var payload string
	err = t.QueryRowContext(ctx, `SELECT payload FROM inbox WHERE thread_id = ? AND kind = ? ORDER BY id LIMIT 1`, id, string(store.KindUserMessage)).Scan(&payload)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var m store.UserMessage
	if json.Unmarshal([]byte(payload), &m) != nil {
		return "", nil // not a message a person can read: no title from it
	}
	return m.Text, nil
}
