// Package sqlite implements the runtime store (package runtime/store) on an
// embedded SQLite database file, using the pure-Go modernc.org/sqlite driver.
//
// The database runs in WAL mode and Update returns only once its writes
// are synced to disk, so a completed Update survives a crash or power
// loss; foreign keys are enforced and the schema is versioned: Open
// applies every migration the file has not seen yet, in order, each in its
// own transaction.
//
// Writes go through a single connection (SQLite allows one writer at a time
// anyway) and take the write lock when they begin, so concurrent writers
// queue instead of failing with SQLITE_BUSY. Concurrent Update calls are
// grouped into one transaction, each in its own savepoint, so that one
// fsync makes many threads' writes durable, and the fsync of one group
// overlaps the execution of the next (see walSyncer). Reads use a small
// pool of read-only connections and see the last committed state.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Store is a store.Store backed by one SQLite file.
type Store struct {
	path   string
	writer *sql.DB
	reader *sql.DB
	group  *committer // runs Update calls in shared transactions
	rcache *stmtCache // prepared statements of the readers
	ckpt   *sql.DB    // the connection checkpoints run on
	lock   *os.File   // holds the store's lock (lock.go) until Close
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// readers is the number of read connections; Views beyond it wait.
const readers = 4

// Open opens (creating if needed) the SQLite database at path and brings its
// schema up to date.
//
// The store belongs to one process: Open locks the file path+".lock" and
// fails with a *LockedError (errors.Is ErrLocked) naming the holder's
// process id while another Store has the database open; Close releases
// the lock, and so does the end of the process. The database file and its
// -wal and -shm files get mode 0600 whatever the umask.
func Open(path string) (*Store, error) {
	return openWith(path, openOptions{})
}

// openOptions are the knobs tests turn.
type openOptions struct {
	sync func() error // replaces the WAL sync
}

func openWith(path string, opts openOptions) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: resolve path %q: %w", path, err)
	}
	lock, err := acquireLock(abs)
	if err != nil {
		return nil, err
	}
	s, err := openLocked(abs, opts)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// openLocked opens the database at abs, whose lock this process holds.
func openLocked(abs string, opts openOptions) (*Store, error) {
	if err := privfile.PrepareSQLite(abs); err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}
	pragmas := url.Values{}
	// synchronous=NORMAL: COMMIT does not sync the WAL; the store's syncer
	// does, before Update returns (walsync.go), and a checkpoint syncs
	// both files as always. Checkpoints run on their own connection, started
	// by the syncer, not inside the writer's COMMIT; the writer checkpoints
	// itself only when a burst of large transactions outruns them
	// (wal_autocheckpoint at 10,000 pages instead of 1,000), and
	// journal_size_limit gives the WAL file back beyond 64 MiB when it
	// restarts.
	for _, p := range []string{"busy_timeout(15000)", "temp_store(MEMORY)", "cache_size(-16000)", "journal_mode(WAL)", "synchronous(NORMAL)", "wal_autocheckpoint(10000)", "journal_size_limit(67108864)", "foreign_keys(1)"} {
		pragmas.Add("_pragma", p)
	}
	wq := url.Values{"_txlock": {"immediate"}}
	for k, v := range pragmas {
		wq[k] = v
	}
	writer, err := sql.Open("sqlite", "file:"+abs+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: %w", abs, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetConnMaxIdleTime(0)
	s := &Store{path: abs, writer: writer, group: &committer{db: writer, path: abs, arrived: make(chan struct{}, 1)}}
	s.group.syncer = newWALSyncer(abs, &s.group.stats, opts.sync)
	s.group.choices = new(atomic.Bool)
	s.group.rows = newRowCache()
	if err := s.migrate(context.Background()); err != nil {
		s.group.syncer.close()
		writer.Close()
		return nil, err
	}
	if err := backfillFirstMessages(context.Background(), writer); err != nil {
		s.group.syncer.close()
		writer.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", abs, err)
	}
	var waiting bool
	if err := writer.QueryRow(`SELECT EXISTS (SELECT 1 FROM choices)`).Scan(&waiting); err != nil {
		s.group.syncer.close()
		writer.Close()
		return nil, fmt.Errorf("sqlite store %s: look for waiting user choices: %w", abs, err)
	}
	s.group.choices.Store(waiting)
	// The committer holds the writer's one connection from here on.
	conn, err := writer.Conn(context.Background())
	if err != nil {
		s.group.syncer.close()
		writer.Close()
		return nil, fmt.Errorf("sqlite store %s: take the writer connection: %w", abs, err)
	}
	s.group.conn = conn
	s.group.cache = newStmtCache(conn)
	// The -wal and -shm files exist now; SQLite gave them the database
	// file's mode, but one left by an older gorap may be readable by all.
	if err := privfile.CheckSQLite(abs); err != nil {
		s.group.syncer.close()
		writer.Close()
		return nil, fmt.Errorf("sqlite store: %w", err)
	}
	// The migrations committed without a sync; make them durable now.
	synced := make(chan error, 1)
	s.group.syncer.after(func(err error) { synced <- err })
	if err := <-synced; err != nil {
		s.group.syncer.close()
		writer.Close()
		return nil, err
	}
	// query_only: a write inside View fails instead of taking the write
	// lock on a reader connection (and queueing behind, or blocking, the
	// writer) only to be rolled back; database/sql's ReadOnly option alone
	// does not stop it with this driver.
	rq := url.Values{"_pragma": append(slices.Clone(pragmas["_pragma"]), "query_only(1)")}
	reader, err := sql.Open("sqlite", "file:"+abs+"?"+rq.Encode())
	if err != nil {
		s.group.syncer.close()
		writer.Close()
		return nil, fmt.Errorf("sqlite store: open %s for reading: %w", abs, err)
	}
	// Every reader connection stays open: one closed and reopened loses its
	// prepared statements and runs the connection pragmas again.
	reader.SetMaxOpenConns(readers)
	reader.SetMaxIdleConns(readers)
	s.reader = reader
	s.rcache = newStmtCache(reader)
	ckpt, err := sql.Open("sqlite", "file:"+abs+"?"+pragmas.Encode())
	if err != nil {
		s.group.syncer.close()
		reader.Close()
		writer.Close()
		return nil, fmt.Errorf("sqlite store: open %s for checkpoints: %w", abs, err)
	}
	ckpt.SetMaxOpenConns(1)
	s.ckpt = ckpt
	s.group.syncer.setCheckpoint(func() {
		// PASSIVE: copy what no reader still needs, never wait for anyone.
		// A failure only leaves the WAL longer until the next one.
		ckpt.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	})
	return s, nil
}

// WriterStats returns what the store's writer did since Open, for
// benchmarks and metrics.
func (s *Store) WriterStats() WriterStats { return s.group.stats.get() }

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
//
// Close waits for the group of writes being committed, if any, and for its
// sync, so that every Update that returned nil is on disk; Updates still
// waiting for their turn, and every call after Close, fail with
// store.ErrClosed. Calling Close again does nothing.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.group.close()
	s.group.syncer.close()
	s.rcache.close()
	s.group.cache.close()
	err := errors.Join(s.group.conn.Close(), s.ckpt.Close(), s.reader.Close(), s.writer.Close())
	if s.lock != nil {
		s.lock.Close() // releases the lock
	}
	return err
}

// Update implements store.Store. Concurrent calls share transactions
// (group commit, see committer); a call whose fn fails is rolled back
// alone, and Update returns once the transaction holding fn's writes has
// committed and the WAL is synced to disk.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.group.update(ctx, fn)
}

// QuickView implements store.Store: fn runs on the writer connection
// before the next group of writes (see committer.run), where the page cache
// stays warm; a reader connection must re-read every page after each write
// (SQLite resets a connection's cache when the WAL changed).
func (s *Store) QuickView(ctx context.Context, fn func(store.Tx) error) error {
	return s.group.enqueue(ctx, fn, true)
}

// View implements store.Store.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlite store %s: %w", s.path, store.ErrClosed)
	}
	sqlTx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite store %s: begin transaction: %w", s.path, err)
	}
	err = fn(&tx{tx: newStmtTx(sqlTx, s.rcache), now: time.Now().UTC(), choices: s.group.choices})
	sqlTx.Rollback()
	s.rcache.prepareWanted()
	return err
}

// migrations are applied in order; migration i brings the schema to version
// i+1. Never edit a released migration: append a new one.
var migrations = []string{
	`CREATE TABLE threads (
		id TEXT PRIMARY KEY,
		parent_id TEXT REFERENCES threads(id),
		root_id TEXT NOT NULL,
		status TEXT NOT NULL,
		created INTEGER NOT NULL
	);
	CREATE INDEX threads_parent ON threads(parent_id);
	CREATE TABLE messages (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		seq INTEGER NOT NULL,
		role TEXT NOT NULL,
		text TEXT NOT NULL DEFAULT '',
		tool_calls TEXT,
		tool_results TEXT,
		created INTEGER NOT NULL,
		PRIMARY KEY (thread_id, seq)
	);
	CREATE TABLE inbox (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		thread_id TEXT NOT NULL REFERENCES threads(id),
		kind TEXT NOT NULL,
		payload TEXT NOT NULL,
		dedup_key TEXT NOT NULL UNIQUE,
		created INTEGER NOT NULL
	);
	CREATE INDEX inbox_thread ON inbox(thread_id, id);
	CREATE TABLE seen_keys (
		key TEXT PRIMARY KEY,
		thread_id TEXT NOT NULL,
		created INTEGER NOT NULL
	);
	CREATE TABLE calls (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		tool_name TEXT NOT NULL,
		arguments TEXT NOT NULL,
		toolset TEXT NOT NULL,
		endpoint TEXT NOT NULL,
		turn_seq INTEGER NOT NULL,
		state TEXT NOT NULL,
		deadline INTEGER,
		created INTEGER NOT NULL,
		updated INTEGER NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE INDEX calls_state ON calls(state, deadline);
	CREATE TABLE subscriptions (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		tool_name TEXT NOT NULL,
		state TEXT NOT NULL,
		created INTEGER NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE TABLE views (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		view_type TEXT NOT NULL,
		content TEXT NOT NULL,
		updated INTEGER NOT NULL,
		PRIMARY KEY (thread_id, view_type)
	);
	CREATE TABLE timers (
		id TEXT PRIMARY KEY,
		thread_id TEXT NOT NULL REFERENCES threads(id),
		kind TEXT NOT NULL,
		payload TEXT,
		due INTEGER NOT NULL,
		created INTEGER NOT NULL
	);
	CREATE INDEX timers_due ON timers(due);
	CREATE TABLE toolset_cache (
		root_id TEXT NOT NULL REFERENCES threads(id),
		base_url TEXT NOT NULL,
		manifest TEXT NOT NULL,
		fetched INTEGER NOT NULL,
		PRIMARY KEY (root_id, base_url)
	);
	CREATE INDEX toolset_cache_url ON toolset_cache(base_url, fetched);`,
	// 2: child thread origins, waiting user choices.
	`ALTER TABLE threads ADD COLUMN origin_call_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE threads ADD COLUMN origin_tool TEXT NOT NULL DEFAULT '';
	ALTER TABLE threads ADD COLUMN origin_args TEXT;
	CREATE TABLE choices (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		tool_name TEXT NOT NULL,
		prompt TEXT NOT NULL,
		choices TEXT NOT NULL,
		default_index INTEGER NOT NULL,
		response_url TEXT NOT NULL,
		created INTEGER NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);`,
	// 3: child threads share their inherited history instead of copying it.
	`ALTER TABLE threads ADD COLUMN inherit_seq INTEGER NOT NULL DEFAULT 0;`,
	// 4: a slice reads only its thread's pending calls.
	`CREATE INDEX calls_thread_state ON calls(thread_id, state);`,
	// 5: subscription events that arrived before their subscription was
	// confirmed (held until its tool_result).
	`CREATE TABLE held_events (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		payload TEXT NOT NULL,
		created INTEGER NOT NULL
	);
	CREATE INDEX held_events_call ON held_events(thread_id, call_id, id);`,
	// 6: threads are listed by page and children by parent, in order.
	`CREATE INDEX threads_created ON threads(created, id);
	CREATE INDEX threads_parent_created ON threads(parent_id, created, id);`,
	// 7: the end user of a session (its root thread; children copy it),
	// sent as user_id in every invocation of the session.
	`ALTER TABLE threads ADD COLUMN user_id TEXT NOT NULL DEFAULT '';`,
	// 8: scheduled tool_call_status checks, one per dispatched call or
	// active subscription; those that exist now are due at once.
	`CREATE TABLE call_checks (
		thread_id TEXT NOT NULL,
		call_id TEXT NOT NULL,
		due INTEGER NOT NULL,
		failures INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE INDEX call_checks_due ON call_checks(due);
	INSERT INTO call_checks (thread_id, call_id, due)
		SELECT thread_id, call_id, 1 FROM calls WHERE state = 'dispatched' AND toolset != 'builtin';
	INSERT OR IGNORE INTO call_checks (thread_id, call_id, due)
		SELECT thread_id, call_id, 1 FROM subscriptions WHERE state = 'active';`,
	// 9: leases of threads and claims of timers, the callback keys and
	// short-lived oauth links, for several processes sharing a store
	// (shared.go).
	`CREATE TABLE thread_leases (
		thread_id TEXT PRIMARY KEY,
		owner TEXT NOT NULL,
		until INTEGER NOT NULL
	);
	ALTER TABLE timers ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
	ALTER TABLE timers ADD COLUMN claim_until INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE callback_keys (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		current BLOB NOT NULL,
		previous BLOB,
		previous_until INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE oauth_links (
		thread_id TEXT NOT NULL,
		call_id TEXT NOT NULL,
		event BLOB NOT NULL,
		created INTEGER NOT NULL,
		expires INTEGER NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE INDEX oauth_links_expires ON oauth_links(expires);`,
	// 10: the recent client events of each thread and each thread's last
	// event id (events.go). The engine does not write
	// them on SQLite, which one process holds: it keeps events in memory.
	`CREATE TABLE thread_event_heads (
		thread_id TEXT PRIMARY KEY,
		last_id INTEGER NOT NULL
	);
	CREATE TABLE thread_events (
		thread_id TEXT NOT NULL,
		id INTEGER NOT NULL,
		type TEXT NOT NULL,
		data BLOB NOT NULL,
		msg_seq INTEGER NOT NULL DEFAULT 0,
		created INTEGER NOT NULL,
		PRIMARY KEY (thread_id, id)
	);
	CREATE INDEX thread_events_created ON thread_events(created);`,
	// 11: the two indexes on a call's state hold only pending calls (new
	// or dispatched), which is what every query through them asks for
	// (pendingCalls): done calls, nearly all of them, no longer make each
	// state change write index pages spread over the whole table.
	`DROP INDEX calls_state;
	DROP INDEX calls_thread_state;
	CREATE INDEX calls_pending ON calls(state, deadline) WHERE ` + pendingCalls + `;
	CREATE INDEX calls_pending_thread ON calls(thread_id, state) WHERE ` + pendingCalls + `;`,
	// 12: the digest each session trusted on first use for a tool
	// server's discovery document (store.ToolsetTrust).
	`CREATE TABLE toolset_trust (
		root_id TEXT NOT NULL REFERENCES threads(id),
		base_url TEXT NOT NULL,
		sha256 TEXT NOT NULL,
		PRIMARY KEY (root_id, base_url)
	);`,
	// 13: one user's threads are listed by page, in order, for a client
	// token bound to that user.
	`CREATE INDEX threads_user_created ON threads(user_id, created, id);`,
	// 14: whole sessions are read and deleted (store.Sessions), and the
	// moves of sessions between runtimes are recorded (store.Moves).
	`CREATE INDEX threads_root_created ON threads(root_id, created, id);
	CREATE INDEX seen_keys_thread ON seen_keys(thread_id);
	CREATE TABLE session_moves (
		root_id TEXT NOT NULL,
		direction TEXT NOT NULL,
		id TEXT NOT NULL,
		state TEXT NOT NULL,
		peer TEXT NOT NULL,
		secret TEXT NOT NULL DEFAULT '',
		data TEXT,
		created INTEGER NOT NULL,
		updated INTEGER NOT NULL,
		expires INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (root_id, direction)
	);`,
	// 15: the token usage of the completion that produced an assistant
	// message (versioned JSON, NULL for other messages).
	`ALTER TABLE messages ADD COLUMN usage TEXT;`,
	// 16: the compactions of threads' histories in the model's view.
	`CREATE TABLE compactions (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		upto_seq INTEGER NOT NULL,
		summary TEXT NOT NULL,
		messages INTEGER NOT NULL,
		usage TEXT,
		created INTEGER NOT NULL,
		PRIMARY KEY (thread_id, upto_seq)
	);`,
	// The block of a compaction the model's API made itself, as it sent
	// it (store.Compaction.Block); NULL for gorap's own.
	`ALTER TABLE compactions ADD COLUMN block BLOB;`,
	// Sessions' titles and archiving (PostgreSQL's migration of the same
	// name): the title a person gave, the start of the first user message
	// (NULL until Open derived it for a thread older than this column:
	// backfillFirstMessages), their folded search text and the archived
	// flag, all on the root thread.
	`ALTER TABLE threads ADD COLUMN title TEXT NOT NULL DEFAULT '';
	ALTER TABLE threads ADD COLUMN first_message TEXT;
	ALTER TABLE threads ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
	ALTER TABLE threads ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX threads_first_message_unset ON threads(id) WHERE first_message IS NULL;`,
	// The pending calls in the order they were made, for the list of
	// the threads waiting longest (store.Calls.OldestPendingCalls).
	`CREATE INDEX calls_pending_created ON calls(created, thread_id, call_id) WHERE ` + pendingCalls + `;`,
	// User inputs (the user_input gorap extension) wait in choices, with
	// their form in fields (NULL for a user choice).
	`ALTER TABLE choices ADD COLUMN fields TEXT;`,
}

// pendingCalls is the condition of the partial indexes on calls
// (migration 11), the one every store shares. SQLite uses such an index
// only for a query whose WHERE clause has this very term, so every query
// for pending calls is written with it.
const pendingCalls = backend.PendingCondition

// The queries for pending calls, each with the partial indexes'
// condition (TestPendingCallQueriesUseThePartialIndexes checks their plans).
const (
	pendingCallsSQL        = `SELECT ` + callCols + ` FROM calls WHERE thread_id = ? AND ` + pendingCalls
	callsInPendingStateSQL = `SELECT ` + callCols + ` FROM calls WHERE ` + pendingCalls + ` AND state = ? ORDER BY created, call_id`
	dueCallsSQL            = `SELECT ` + callCols + ` FROM calls WHERE ` + pendingCalls + ` AND deadline IS NOT NULL AND deadline <= ? ORDER BY deadline`
	nextDeadlineSQL        = `SELECT MIN(deadline) FROM calls WHERE ` + pendingCalls + ` AND deadline IS NOT NULL`
	uncheckedCallsSQL      = `SELECT ` + callCols + ` FROM calls c WHERE ` + pendingCalls + ` AND state = 'dispatched' AND updated <= ? AND toolset != ?
		AND NOT EXISTS (SELECT 1 FROM call_checks k WHERE k.thread_id = c.thread_id AND k.call_id = c.call_id) LIMIT ?`
	// oldestPendingCallsSQL and the same for one user's threads take the
	// cursor (created, thread id, call id) and the limit. The first walks
	// the index in its order and stops at the limit (named: SQLite's
	// planner would rather search calls_pending by state and sort every
	// pending call); the second reads the user's threads' pending calls
	// (calls_pending_thread) and sorts those.
	oldestPendingCallsSQL = `SELECT ` + callCols + ` FROM calls INDEXED BY calls_pending_created WHERE ` + pendingCalls + `
		AND (created, thread_id, call_id) > (?1, ?2, ?3) ORDER BY created, thread_id, call_id LIMIT ?4`
	oldestUserPendingCallsSQL = `SELECT ` + callCols + ` FROM calls WHERE ` + pendingCalls + ` AND (created, thread_id, call_id) > (?1, ?2, ?3)
		AND thread_id IN (SELECT id FROM threads WHERE user_id = ?5) ORDER BY created, thread_id, call_id LIMIT ?4`
)

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite store %s: create schema_version table: %w", s.path, err)
	}
	for {
		done, err := s.migrateOne(ctx)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next migration, reporting done when there is none.
func (s *Store) migrateOne(ctx context.Context) (done bool, err error) {
	t, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("sqlite store %s: begin migration: %w", s.path, err)
	}
	defer t.Rollback()
	var v int
	err = t.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := t.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return false, fmt.Errorf("sqlite store %s: init schema_version: %w", s.path, err)
		}
	case err != nil:
		return false, fmt.Errorf("sqlite store %s: read schema version: %w", s.path, err)
	}
	if v > len(migrations) {
		return false, fmt.Errorf("sqlite store %s: schema version %d is newer than this program knows (%d); use a newer gorap or another data dir", s.path, v, len(migrations))
	}
	if v == len(migrations) {
		return true, t.Commit()
	}
	if _, err := t.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("sqlite store %s: migration %d: %w", s.path, v+1, err)
	}
	if _, err := t.ExecContext(ctx, `UPDATE schema_version SET version = ?`, v+1); err != nil {
		return false, fmt.Errorf("sqlite store %s: record schema version %d: %w", s.path, v+1, err)
	}
	return false, t.Commit()
}
