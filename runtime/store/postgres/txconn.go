package postgres

// This file owns how a transaction talks to its connection. A transaction
// does not send BEGIN on its own: BEGIN travels in one round trip with the
// transaction's first statement (a pipelined batch), which saves the
// database a network exchange, a wake-up and a reply per transaction. The
// snapshot is the same either way: PostgreSQL takes a REPEATABLE READ or
// SERIALIZABLE transaction's snapshot at its first statement, not at BEGIN.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// beginSQL is the BEGIN statement of a transaction with opts.
func beginSQL(opts pgx.TxOptions) string {
	s := "BEGIN ISOLATION LEVEL " + string(opts.IsoLevel)
	if opts.AccessMode == pgx.ReadOnly {
		s += " READ ONLY"
	}
	return s
}

// endTimeout bounds the COMMIT or ROLLBACK that ends a transaction whose
// caller's context is already done.
const endTimeout = 10 * time.Second

// errCommitRolledBack is the error of a COMMIT that PostgreSQL answered
// with ROLLBACK: a statement of the transaction had failed, so nothing of
// it was stored.
var errCommitRolledBack = errors.New("the transaction was rolled back by the database because one of its statements failed")

// sendBatch sends b on the transaction's connection, with the pending
// BEGIN in front when no statement has run yet. The caller reads b's
// results from what it returns and closes it.
func (t *tx) sendBatch(b *pgx.Batch) (pgx.BatchResults, error) {
	t.s.txc.roundTrips.Add(1)
	if t.begin == "" {
		return t.conn.SendBatch(t.ctx, b), nil
	}
	begin := &pgx.QueuedQuery{SQL: t.begin}
	b.QueuedQueries = append([]*pgx.QueuedQuery{begin}, b.QueuedQueries...)
	t.begin = ""
	br := t.conn.SendBatch(t.ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, t.note(fmt.Errorf("begin transaction: %w", err))
	}
	return br, nil
}

func (t *tx) exec(sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begin == "" {
		t.s.txc.roundTrips.Add(1)
		tag, err := t.conn.Exec(t.ctx, sql, args...)
		return tag, t.note(err)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := t.sendBatch(b)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, t.note(err)
}

func (t *tx) query(sql string, args ...any) (pgx.Rows, error) {
	if t.begin == "" {
		t.s.txc.roundTrips.Add(1)
		rows, err := t.conn.Query(t.ctx, sql, args...)
		return rows, t.note(err)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := t.sendBatch(b)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, t.note(err)
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// batchRows are the rows of a statement sent in a batch: closing them
// also closes the batch, which frees the connection for the next one.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// row is a pgx.Row whose Scan error is noted.
type row struct {
	t *tx
	r pgx.Row
}

func (r row) Scan(dest ...any) error { return r.t.note(r.r.Scan(dest...)) }

func (t *tx) queryRow(sql string, args ...any) row {
	if t.begin == "" {
		t.s.txc.roundTrips.Add(1)
		return row{t, t.conn.QueryRow(t.ctx, sql, args...)}
	}
	rows, err := t.query(sql, args...)
	return row{t, firstRow{rows, err}}
}

// firstRow is the first row of rows, read the way pgx reads QueryRow's:
// pgx.ErrNoRows when there is none.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (f firstRow) Scan(dest ...any) error {
	if f.err != nil {
		return f.err
	}
	defer f.rows.Close()
	if !f.rows.Next() {
		if err := f.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := f.rows.Scan(dest...); err != nil {
		return err
	}
	f.rows.Close()
	return f.rows.Err()
}

// end ends the transaction with COMMIT or ROLLBACK, unless no statement
// ran (then there is nothing to end), and gives the connection back to
// the pool. A connection whose transaction could not be ended is closed
// by the pool rather than reused.
func (t *tx) end(ctx context.Context, commit bool) error {
	defer t.conn.Release()
	if t.begin != "" {
		return nil
	}
	t.s.txc.roundTrips.Add(1)
	if !commit {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
		defer cancel()
		_, err := t.conn.Exec(ctx, "ROLLBACK")
		return err
	}
	tag, err := t.conn.Exec(ctx, "COMMIT")
	if err == nil && tag.String() == "ROLLBACK" {
		err = errCommitRolledBack
	}
	return err
}
