package durable

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
)

// MaxDeadLetters is the largest limit DeadLetters honours.
const MaxDeadLetters = MaxPending

// PendingFor returns up to limit undelivered messages for the destination
// dest (rap.Destination of their URL) enqueued after the one numbered
// after, in enqueue order. It implements rap.DestinationOutbox, which lets
// a Sender read a dead runtime's backlog a little at a time while other
// runtimes' callbacks go on.
func (s *Store) PendingFor(ctx context.Context, dest string, after int64, limit int) ([]rap.SequencedMessage, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("durable: PendingFor: limit %d; ask for at least one message", limit)
	}
	limit = min(limit, MaxPending)
	// The prefix test finds candidates in SQL; rap.Destination settles a
	// longer host sharing the prefix ("http://a:1" and "http://a:10").
	var out []rap.SequencedMessage
	for {
		ask := limit - len(out)
		msgs, err := readAll(ctx, s, "PendingFor",
			`SELECT seq, key, url, body, attempts, created, COALESCE(traceparent, ''), COALESCE(tracestate, ''), COALESCE(for_id, '')
			FROM outbox WHERE seq > ? AND substr(url, 1, ?) = ? ORDER BY seq LIMIT ?`,
			func(rows *sql.Rows) (rap.SequencedMessage, error) {
				var m rap.SequencedMessage
				var created int64
				err := rows.Scan(&m.Seq, &m.Key, &m.URL, &m.Body, &m.Attempts, &created, &m.TraceParent, &m.TraceState, &m.ForID)
				m.Created = time.Unix(0, created)
				return m, err
			}, after, len(dest), dest, ask)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			after = m.Seq
			if rap.Destination(m.URL) == dest {
				out = append(out, m)
			}
		}
		if len(msgs) < ask || len(out) >= limit {
			return out, nil
		}
	}
}

// DeadLetter moves the pending message key to the dead letters with the
// last HTTP status and the reason delivery stopped (rap.DeadLetterStore).
// An unknown key is not an error.
func (s *Store) DeadLetter(ctx context.Context, key string, status int, reason string) error {
	return s.write(ctx, "DeadLetter "+key, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO dead_letters (key, url, body, attempts, created, dead_at, status, reason)
			SELECT key, url, body, attempts, created, ?, ?, ? FROM outbox WHERE key = ?
			ON CONFLICT (key) DO UPDATE SET dead_at = excluded.dead_at, status = excluded.status, reason = excluded.reason`,
			time.Now().UnixNano(), status, reason, key); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE key = ?`, key)
		return err
	})
}

// DeadLetters returns up to limit dead letters, oldest first
// (rap.DeadLetterStore). A limit above MaxDeadLetters is reduced to it.
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]rap.DeadLetter, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("durable: DeadLetters: limit %d; ask for at least one", limit)
	}
	limit = min(limit, MaxDeadLetters)
	return readAll(ctx, s, "DeadLetters", `SELECT key, url, body, attempts, created, dead_at, status, reason FROM dead_letters ORDER BY dead_at, key LIMIT ?`,
		func(rows *sql.Rows) (rap.DeadLetter, error) {
			var d rap.DeadLetter
			var created, deadAt int64
			err := rows.Scan(&d.Key, &d.URL, &d.Body, &d.Attempts, &created, &deadAt, &d.Status, &d.Reason)
			d.Created, d.DeadAt = time.Unix(0, created), time.Unix(0, deadAt)
			return d, err
		}, limit)
}

// RetryDeadLetter moves a dead letter back into the outbox, at the end of
// the queue, with no attempts and a new creation time, so that it gets a
// full retry age again (rap.DeadLetterStore). A running Sender picks it up
// within a second. An unknown key is an error wrapping rap.ErrNoDeadLetter.
func (s *Store) RetryDeadLetter(ctx context.Context, key string) error {
	return s.write(ctx, "RetryDeadLetter "+key, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO outbox (key, url, body, attempts, created)
			SELECT key, url, body, 0, ? FROM dead_letters WHERE key = ?
			ON CONFLICT (key) DO NOTHING`, time.Now().UnixNano(), key)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return noDeadLetter(ctx, tx, key)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM dead_letters WHERE key = ?`, key)
		return err
	})
}

// DropDeadLetter forgets a dead letter (rap.DeadLetterStore). An unknown
// key is an error wrapping rap.ErrNoDeadLetter.
func (s *Store) DropDeadLetter(ctx context.Context, key string) error {
	return s.write(ctx, "DropDeadLetter "+key, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM dead_letters WHERE key = ?`, key)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return noDeadLetter(ctx, tx, key)
		}
		return nil
	})
}

// noDeadLetter is the error for a key RetryDeadLetter or DropDeadLetter
// did not find; it notes when the key is still pending in the outbox.
func noDeadLetter(ctx context.Context, tx *sql.Tx, key string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE key = ?`, key).Scan(&n); err == nil && n > 0 {
		return fmt.Errorf("%w (%s is still pending in the outbox)", rap.ErrNoDeadLetter, key)
	}
	return fmt.Errorf("%w: %s; list them with \"rap outbox list\"", rap.ErrNoDeadLetter, strings.TrimSpace(key))
}

// PendingCount returns how many messages wait in the outbox.
func (s *Store) PendingCount(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox`).Scan(&n); err != nil {
		return 0, fmt.Errorf("durable: PendingCount from %s: %w", s.path, err)
	}
	return n, nil
}
