package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// maxCachedStatements bounds a statement cache; queries beyond it are
// prepared each time, as without a cache.
const maxCachedStatements = 256

// stmtCache keeps the store's SQL statements prepared, so that SQLite parses
// each one once per connection instead of on every use (parsing was a fifth
// of a slice's CPU time).
//
// A statement is prepared only between transactions (see prepareWanted):
// preparing inside one would wait for a connection that the transaction
// itself may hold.
type stmtCache struct {
	db     preparer
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
}

// preparer is *sql.DB (statements for any of its connections) or *sql.Conn
// (statements for that connection only: the writer's).
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

func newStmtCache(db preparer) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get returns the prepared statement for query, or nil when it is not
// prepared yet (the caller then runs the query unprepared, and the query is
// prepared after the transaction).
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.stmts[query]; ok {
		return s
	}
	if len(c.stmts)+len(c.wanted) < maxCachedStatements {
		c.wanted[query] = true
	}
	return nil
}

// prepareWanted prepares the queries that missed the cache. It must be
// called outside any transaction on the cache's database.
func (c *stmtCache) prepareWanted() {
	c.mu.Lock()
	if len(c.wanted) == 0 {
		c.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(c.wanted))
	for q := range c.wanted {
		queries = append(queries, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, q := range queries {
		s, err := c.db.PrepareContext(context.Background(), q)
		if err != nil {
			continue // running it unprepared reports the error
		}
		c.mu.Lock()
		if _, dup := c.stmts[q]; dup {
			s.Close()
		} else {
			c.stmts[q] = s
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, s := range c.stmts {
		s.Close()
		delete(c.stmts, q)
	}
}

// stmtTx runs statements in a transaction through a statement cache. It has
// the methods of *sql.Tx that the store uses. It keeps the transaction's
// binding of each cached statement (tx.Stmt), so that a statement run
// several times in one transaction (a group commit runs the same few for
// every update in it) is bound once.
type stmtTx struct {
	// tx is the transaction on a reader connection; nil on the writer,
	// whose transactions are BEGIN and COMMIT statements on conn.
	tx    *sql.Tx
	conn  *sql.Conn
	cache *stmtCache
	bound []boundStmt
	buf   [12]boundStmt // bound's first array
	// rows is the writer's row cache, nil on a reader connection; overlay
	// holds this transaction's changes to it (see rowCache).
	rows    *rowCache
	overlay rowOverlay
	// readOnly refuses every statement but a SELECT: the writer's
	// QuickView reads run in its write transaction, and a write there
	// would reach the row cache and then be rolled back with a group of
	// reads alone. It is checked here rather than with SQLite's
	// query_only pragma, since setting any such flag pragma expires every
	// prepared statement of the connection, so that each was compiled
	// again after every group of reads (4–5 % of rap serve's CPU).
	readOnly bool
}

// errWriteInRead is the error of a statement that would write, run where
// only reads are allowed.
var errWriteInRead = errors.New("a read-only view ran a statement that writes")

// refuses reports the error of running query on t, if t refuses it.
func (t *stmtTx) refuses(query string) error {
	if !t.readOnly || isSelect(query) {
		return nil
	}
	word, _, _ := strings.Cut(strings.TrimSpace(query), " ")
	return fmt.Errorf("%w (%s)", errWriteInRead, word)
}

// isSelect reports whether query is one SELECT statement, which cannot
// write (the store defines no SQL function that writes). A query holding
// more statements is not: the driver runs them all.
func isSelect(query string) bool {
	query = strings.TrimLeft(query, " \t\r\n")
	if len(query) < 6 || !strings.EqualFold(query[:6], "SELECT") {
		return false
	}
	_, more, found := strings.Cut(query, ";")
	return !found || strings.TrimSpace(more) == ""
}

type boundStmt struct {
	prepared, inTx *sql.Stmt
}

func newStmtTx(tx *sql.Tx, cache *stmtCache) *stmtTx {
	t := &stmtTx{tx: tx, cache: cache}
	t.bound = t.buf[:0]
	return t
}

// newConnTx runs statements on conn, the writer's connection, in the
// transaction the caller began there. Its cache's statements are conn's.
//
// The writer does not use *sql.Tx: database/sql starts a goroutine, with
// a cancellable context, for every query run in one (to close its rows
// when the transaction's context ends), which is a measurable part of a
// cycle's cost. A query on a *sql.Conn with a context
// that is never done starts none.
func newConnTx(conn *sql.Conn, cache *stmtCache) *stmtTx {
	return &stmtTx{conn: conn, cache: cache}
}

// stmt returns the transaction's binding of query's prepared statement,
// or nil when it is not prepared yet.
func (t *stmtTx) stmt(query string) *sql.Stmt {
	s := t.cache.get(query)
	if s == nil || t.tx == nil {
		return s // nil, or a statement of the writer's connection
	}
	for _, b := range t.bound {
		if b.prepared == s {
			return b.inTx
		}
	}
	in := t.tx.Stmt(s)
	t.bound = append(t.bound, boundStmt{s, in})
	return in
}

func (t *stmtTx) Exec(query string, args ...any) (sql.Result, error) {
	if err := t.refuses(query); err != nil {
		return nil, err
	}
	if s := t.stmt(query); s != nil {
		return s.Exec(args...)
	}
	if t.tx == nil {
		return t.conn.ExecContext(context.Background(), query, args...)
	}
	return t.tx.Exec(query, args...)
}

func (t *stmtTx) Query(query string, args ...any) (*sql.Rows, error) {
	if err := t.refuses(query); err != nil {
		return nil, err
	}
	if s := t.stmt(query); s != nil {
		return s.Query(args...)
	}
	if t.tx == nil {
		return t.conn.QueryContext(context.Background(), query, args...)
	}
	return t.tx.Query(query, args...)
}

// scanner is the result of QueryRow: a *sql.Row (which, being a pointer,
// becomes the scan helpers' interface value without an allocation), or a
// refused statement's error.
type scanner interface{ Scan(dest ...any) error }

// refused is a statement that did not run, for its error.
type refused struct{ err error }

// Scan returns the error that kept the statement from running.
func (r refused) Scan(...any) error { return r.err }

func (t *stmtTx) QueryRow(query string, args ...any) scanner {
	if err := t.refuses(query); err != nil {
		return refused{err}
	}
	if s := t.stmt(query); s != nil {
		return s.QueryRow(args...)
	}
	if t.tx == nil {
		return t.conn.QueryRowContext(context.Background(), query, args...)
	}
	return t.tx.QueryRow(query, args...)
}
