package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// maxGroup bounds how many Update calls share one transaction.
const maxGroup = 256

// committer runs Update calls of many goroutines in shared transactions, so
// that one fsync makes a whole group durable (group commit). A call whose
// function fails is rolled back alone and the others commit (see run). A
// call returns only once its group has committed and been synced.
//
// There is no background goroutine: the first caller to find the committer
// idle becomes the leader and runs groups until the queue is empty, while
// the callers that arrive meanwhile wait for their group.
type committer struct {
	db *sql.DB
	// conn is db's one connection, held for good: each group's
	// transaction is BEGIN and COMMIT statements on it (see newConnTx).
	conn    *sql.Conn
	path    string
	cache   *stmtCache
	syncer  *walSyncer   // makes each committed group durable before it returns
	choices *atomic.Bool // see tx.choices
	rows    *rowCache    // rows the writer read or wrote (see rowCache)
	// arrived is signalled when a call is queued while a leader runs.
	arrived chan struct{}

	mu      sync.Mutex
	queue   []*groupCall
	leading bool
	// closed is set by close: no call is queued or run after it.
	closed bool
	// idle, when not nil, is closed once the leader stops (close waits
	// on it for the group being written).
	idle  chan struct{}
	stats writerStats
}

// WriterStats counts the work of a store's writer since it was opened.
type WriterStats struct {
	// Transactions is how many write transactions ran.
	Transactions int64
	// Updates is how many Update calls they held (group commit: Updates /
	// Transactions calls share one fsync on average).
	Updates int64
	// Busy is the time the writer spent in transactions, commits included.
	Busy time.Duration
	// Commit is the part of Busy spent committing: appending the
	// transaction to the WAL.
	Commit time.Duration
	// Syncs is how many times the WAL was synced to disk; each sync makes
	// every transaction committed before it durable.
	Syncs int64
	// Sync is the time spent syncing, off the writer (see walSyncer).
	Sync time.Duration
	// Checkpoints is how many times the WAL was copied into the database
	// file, off the writer.
	Checkpoints int64
	// QuickViews is how many QuickView calls the writer ran, and
	// QuickViewTime the time it spent on them.
	QuickViews    int64
	QuickViewTime time.Duration
}

type writerStats struct {
	mu sync.Mutex
	s  WriterStats
}

func (w *writerStats) record(updates int, busy, commit time.Duration) {
	w.mu.Lock()
	w.s.Transactions++
	w.s.Updates += int64(updates)
	w.s.Busy += busy
	w.s.Commit += commit
	w.mu.Unlock()
}

func (w *writerStats) recordSync(d time.Duration) {
	w.mu.Lock()
	w.s.Syncs++
	w.s.Sync += d
	w.mu.Unlock()
}

func (w *writerStats) recordReads(n int, d time.Duration) {
	w.mu.Lock()
	w.s.QuickViews += int64(n)
	w.s.QuickViewTime += d
	w.mu.Unlock()
}

func (w *writerStats) recordCheckpoint() {
	w.mu.Lock()
	w.s.Checkpoints++
	w.mu.Unlock()
}

func (w *writerStats) get() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s
}

type groupCall struct {
	ctx  context.Context
	fn   func(store.Tx) error
	done chan error
	read bool // a QuickView: runs before the group's writes, returns at once
}

// groupCalls keeps groupCall values, each with its done channel, for reuse:
// a call is released once its caller has received its one outcome, after
// which the committer no longer looks at it (each call is sent exactly one
// outcome, as the last thing done with it).
var groupCalls = sync.Pool{New: func() any { return &groupCall{done: make(chan error, 1)} }}

// release returns an empty call to groupCalls.
func (g *groupCall) release() {
	g.ctx, g.fn = nil, nil
	groupCalls.Put(g)
}

func (c *committer) update(ctx context.Context, fn func(store.Tx) error) error {
	return c.enqueue(ctx, fn, false)
}

// enqueue runs fn in the next group and waits for its outcome.
func (c *committer) enqueue(ctx context.Context, fn func(store.Tx) error, read bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	call := groupCalls.Get().(*groupCall)
	call.ctx, call.fn, call.read = ctx, fn, read
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		call.release()
		return c.closedErr()
	}
	c.queue = append(c.queue, call)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	if !lead {
		select {
		case c.arrived <- struct{}{}:
		default:
		}
	}
	if lead {
		c.lead()
	}
	// The result arrives once the call's group has committed or failed; a
	// call that is already in a transaction cannot be abandoned half way,
	// so the caller's context is only checked before its function runs.
	err := <-call.done
	call.release()
	return err
}

// lead runs groups until the queue is empty, or until close, which fails
// the calls still queued.
func (c *committer) lead() {
	for {
		c.mu.Lock()
		if c.closed {
			for _, call := range c.queue {
				call.done <- c.closedErr()
			}
			c.queue = nil
		}
		n := min(len(c.queue), maxGroup)
		if n == 0 {
			c.leading = false
			if c.idle != nil {
				close(c.idle)
				c.idle = nil
			}
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
//
// QuickView calls run first, on the last committed state, and return at
// once. The writes then run one after the other in one transaction, with no
// savepoint between them (two statements per call, a measurable part of a
// runtime cycle). When a write's function fails, the transaction is rolled
// back, that call gets its error, and the other writes run again from the
// start: store.Store allows a function to run more than once, and failures
// are rare (a bug, a constraint violation, a full disk).
//
// While the previous group's sync is still in flight, writes that arrive
// meanwhile join this transaction before it commits: they would wait for
// the next sync anyway, and a bigger group writes each hot page to the WAL
// once instead of once per group.
func (c *committer) run(group []*groupCall) {
	if err := c.syncer.broken(); err != nil {
		deliver(group, make([]error, len(group)), err)
		return
	}
	start := time.Now()
	if err := c.exec("BEGIN IMMEDIATE"); err != nil {
		deliver(group, make([]error, len(group)), fmt.Errorf("sqlite store %s: begin transaction: %w", c.path, err))
		return
	}
	// The reads run first in the transaction the writes then use: one
	// BEGIN and one COMMIT (each taking and releasing SQLite's locks) per
	// group rather than per read and per write group.
	group = c.runReads(group)
	if len(group) == 0 {
		c.exec("ROLLBACK")
		return
	}
	results := make([]error, len(group))
	decided := make([]bool, len(group)) // results[i] is final
	updates := len(group)               // counted once, however many attempts
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			start = time.Now()
			if err := c.exec("BEGIN IMMEDIATE"); err != nil {
				deliver(group, results, fmt.Errorf("sqlite store %s: begin transaction: %w", c.path, err))
				return
			}
		}
		st := newConnTx(c.conn, c.cache)
		st.rows = c.rows
		ran, failed := 0, false
		exec := func(from int) {
			for i := from; i < len(group) && !failed; i++ {
				if decided[i] {
					continue
				}
				call := group[i]
				if err := call.ctx.Err(); err != nil {
					results[i], decided[i] = err, true
					continue
				}
				if err := call.fn(&tx{tx: st, now: time.Now().UTC(), choices: c.choices}); err != nil {
					results[i], decided[i] = err, true
					failed = true
					return
				}
				ran++
			}
		}
		exec(0)
		for !failed && len(group) < maxGroup {
			more := c.joinWhileSyncing(maxGroup - len(group))
			if len(more) == 0 {
				break
			}
			from := len(group)
			group = append(group, more...)
			results = append(results, make([]error, len(more))...)
			decided = append(decided, make([]bool, len(more))...)
			updates += len(more)
			exec(from)
		}
		if failed || ran == 0 {
			err := c.exec("ROLLBACK")
			c.stats.record(updates, time.Since(start), 0)
			updates = 0
			if failed && err == nil && slices.Contains(decided, false) {
				continue // run the others again without the failed call
			}
			if err != nil {
				err = fmt.Errorf("sqlite store %s: roll back: %w", c.path, err)
			}
			deliver(group, results, err)
			return
		}
		t := time.Now()
		err := c.exec("COMMIT")
		c.stats.record(updates, time.Since(start), time.Since(t))
		if err != nil {
			// SQLite may leave the transaction open after a failed COMMIT;
			// end it, or every later BEGIN on this connection would fail.
			c.exec("ROLLBACK")
			c.rows.reset()
			deliver(group, results, fmt.Errorf("sqlite store %s: commit: %w", c.path, err))
			return
		}
		c.rows.merge(&st.overlay)
		// Committed but maybe not yet on disk: the calls return once the
		// syncer has synced the WAL, while this goroutine runs the next
		// group.
		c.syncer.after(func(err error) { deliver(group, results, err) })
		return
	}
}

// runReads runs the group's QuickView calls in the transaction begun on
// the writer's connection, which has not written anything yet, and
// returns the other calls.
func (c *committer) runReads(group []*groupCall) []*groupCall {
	writes := group[:0:0]
	for _, call := range group {
		if !call.read {
			writes = append(writes, call)
		}
	}
	if len(writes) == len(group) {
		return group
	}
	start := time.Now()
	reads := 0
	st := newConnTx(c.conn, c.cache)
	st.rows = c.rows
	// The reads see only committed rows (sqlTx has written nothing yet):
	// what they read is the committed state. They may only read (see
	// stmtTx.readOnly).
	st.readOnly = true
	defer c.rows.merge(&st.overlay)
	for _, call := range group {
		if !call.read {
			continue
		}
		reads++
		if err := call.ctx.Err(); err != nil {
			call.done <- err
			continue
		}
		call.done <- call.fn(&tx{tx: st, now: time.Now().UTC(), choices: c.choices})
	}
	c.stats.recordReads(reads, time.Since(start))
	return writes
}

// joinWhileSyncing waits, while a sync is in flight, for writes queued
// after the group was taken, and removes up to max of them from the queue.
// It returns nothing once no sync is in flight.
func (c *committer) joinWhileSyncing(max int) []*groupCall {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil // the group being written is the last
		}
		var more []*groupCall
		if reads := c.queuedReads(); reads == 0 && len(c.queue) <= max {
			// All of the queue joins: no copy (the writer was given the
			// queue's array, later calls are appended past its end).
			more, c.queue = c.queue, c.queue[len(c.queue):]
		} else if reads < len(c.queue) {
			more = make([]*groupCall, 0, min(len(c.queue)-reads, max))
			rest := c.queue[:0] // in place: it is written behind the loop's reads
			for _, call := range c.queue {
				if !call.read && len(more) < max {
					more = append(more, call)
				} else {
					rest = append(rest, call)
				}
			}
			clear(c.queue[len(rest):])
			c.queue = rest
		}
		c.mu.Unlock()
		if len(more) > 0 {
			return more
		}
		if !c.syncer.waitWhileSyncing(c.arrived) {
			return nil
		}
	}
}

// queuedReads counts the QuickView calls in the queue; c.mu is held.
func (c *committer) queuedReads() int {
	n := 0
	for _, call := range c.queue {
		if call.read {
			n++
		}
	}
	return n
}

// close refuses further calls and waits until the group being written, if
// any, has committed (its calls then wait for their sync as usual); calls
// still queued behind it fail with store.ErrClosed.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	if !c.leading {
		c.mu.Unlock()
		return
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	<-idle
}

// closedErr is the error of a call refused because the store is closed.
func (c *committer) closedErr() error {
	return fmt.Errorf("sqlite store %s: %w", c.path, store.ErrClosed)
}

// exec runs a statement that controls the transaction on the writer's
// connection (BEGIN, COMMIT, ROLLBACK), prepared once like the others.
func (c *committer) exec(stmt string) error {
	if s := c.cache.get(stmt); s != nil {
		_, err := s.Exec()
		return err
	}
	_, err := c.conn.ExecContext(context.Background(), stmt)
	return err
}

// deliver reports each call's outcome: its own error, or else err, the
// error of its group's transaction or sync.
func deliver(group []*groupCall, results []error, err error) {
	for i, call := range group {
		if results[i] == nil {
			results[i] = err
		}
		call.done <- results[i]
	}
}
