package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// maxGroup bounds how many Update calls share one transaction.
const maxGroup = 256

// committer runs Update calls of many goroutines in shared transactions, so
// that one fsync makes a whole group durable (group commit). Each call runs
// inside its own savepoint: a call whose function fails is rolled back alone
// and the others commit. A call returns only once its group has committed.
//
// There is no background goroutine: the first caller to find the committer
// idle becomes the leader and runs groups until the queue is empty, while
// the callers that arrive meanwhile wait for their group.
type committer struct {
	db    *sql.DB
	path  string
	cache *stmtCache

	mu      sync.Mutex
	queue   []*groupCall
	leading bool
}

type groupCall struct {
	ctx  context.Context
	fn   func(store.Tx) error
	done chan error
}

func (c *committer) update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	call := &groupCall{ctx: ctx, fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, call)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	if lead {
		c.lead()
	}
	// The result arrives once the call's group has committed or failed; a
	// call that is already in a transaction cannot be abandoned half way,
	// so the caller's context is only checked before its function runs.
	return <-call.done
}

// lead runs groups until the queue is empty.
func (c *committer) lead() {
	for {
		c.mu.Lock()
		n := min(len(c.queue), maxGroup)
		if n == 0 {
			c.leading = false
			c.mu.Unlock()
			return
		}
		group := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.mu.Unlock()
		c.run(group)
		c.cache.prepareWanted() // between transactions, the connection is free
	}
}

// run executes one group in one transaction and reports to each call.
func (c *committer) run(group []*groupCall) {
	results := make([]error, len(group))
	fail := func(err error) {
		for _, call := range group {
			call.done <- err
		}
	}
	sqlTx, err := c.db.BeginTx(context.Background(), nil)
	if err != nil {
		fail(fmt.Errorf("sqlite store %s: begin transaction: %w", c.path, err))
		return
	}
	ran := 0
	for i, call := range group {
		if err := call.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if _, err := sqlTx.Exec("SAVEPOINT call"); err != nil {
			sqlTx.Rollback()
			fail(fmt.Errorf("sqlite store %s: savepoint: %w", c.path, err))
			return
		}
		if results[i] = call.fn(&tx{tx: stmtTx{sqlTx, c.cache}, now: time.Now().UTC()}); results[i] != nil {
			_, err = sqlTx.Exec("ROLLBACK TO call")
			if err == nil {
				_, err = sqlTx.Exec("RELEASE call")
			}
		} else {
			ran++
			_, err = sqlTx.Exec("RELEASE call")
		}
		if err != nil {
			sqlTx.Rollback()
			fail(fmt.Errorf("sqlite store %s: end savepoint: %w", c.path, err))
			return
		}
	}
	if ran == 0 {
		err = sqlTx.Rollback()
	} else {
		err = sqlTx.Commit()
	}
	for i, call := range group {
		if results[i] == nil && err != nil {
			results[i] = fmt.Errorf("sqlite store %s: commit: %w", c.path, err)
		}
		call.done <- results[i]
	}
}
