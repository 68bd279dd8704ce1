package sqlite

import (
	"database/sql"
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
	db     *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
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
		s, err := c.db.Prepare(q)
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
// the methods of *sql.Tx that the store uses.
type stmtTx struct {
	tx    *sql.Tx
	cache *stmtCache
}

func (t stmtTx) Exec(query string, args ...any) (sql.Result, error) {
	if s := t.cache.get(query); s != nil {
		return t.tx.Stmt(s).Exec(args...)
	}
	return t.tx.Exec(query, args...)
}

func (t stmtTx) Query(query string, args ...any) (*sql.Rows, error) {
	if s := t.cache.get(query); s != nil {
		return t.tx.Stmt(s).Query(args...)
	}
	return t.tx.Query(query, args...)
}

func (t stmtTx) QueryRow(query string, args ...any) *sql.Row {
	if s := t.cache.get(query); s != nil {
		return t.tx.Stmt(s).QueryRow(args...)
	}
	return t.tx.QueryRow(query, args...)
}
