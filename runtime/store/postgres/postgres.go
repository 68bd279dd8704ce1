// Package postgres implements the runtime store (package runtime/store) on
// a PostgreSQL database, through a pgx connection pool, so that several
// `rap serve` processes can share one database.
//
// Update runs in a SERIALIZABLE transaction and is retried, from the
// start, when PostgreSQL reports a serialization failure or a deadlock
// (SQLSTATE 40001, 40P01), as the store.Store contract allows. View and
// QuickView run in a READ ONLY, REPEATABLE READ transaction: one snapshot.
//
// Texts and JSON payloads are stored as bytea, byte for byte: PostgreSQL's
// text type refuses a NUL byte and jsonb the escape \u0000, both of which
// a model or a tool may send. Times are timestamptz, to the microsecond.
//
// The schema is versioned: Open applies every migration the database has
// not seen yet, in order, each in its own transaction, holding an advisory
// lock so that processes starting together migrate once.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// Store is a store.Store backed by a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	// where names the database in errors, without the password.
	where string
	// wakeChannel is the NOTIFY channel of the store's schema and sender
	// the id that marks this Store's notifications (wakeups.go).
	wakeChannel, sender string
	// deltaChannel is the NOTIFY channel of text deltas (deltas.go).
	deltaChannel string
	// id is the store's id (storeid.go).
	id     string
	closed atomic.Bool
	txc    txCounters
	// mux shares one LISTEN connection between the listeners (listen.go).
	mux listenMux
}

var _ store.Store = (*Store)(nil)

// defaultMaxConns is the pool size when the URL sets no pool_max_conns.
const defaultMaxConns = 16

// Open connects to the PostgreSQL database at url (a postgres:// URL or a
// key=value connection string, as libpq takes; search_path=... selects a
// schema, pool_max_conns=N sizes the pool, 16 by default) and brings its
// schema up to date.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres store: parse the connection URL: %w (want postgres://user@host:5432/dbname)", redactErr(err))
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default (4 on a small machine) queues a busy runtime's
		// transactions, which wait on round trips, not CPU.
		cfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store %s: %w", where, redactErr(err))
	}
	s := &Store{pool: pool, where: where}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store %s: connect: %w (is PostgreSQL running, and the URL right?)", where, redactErr(err))
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.backfillFirstMessages(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.initWakes(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.initID(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// redactErr drops a connection error's text down to what cannot hold the
// password: pgx errors about a URL may quote it.
func redactErr(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("the connection string is malformed")
	}
	return err
}

// SharedByProcesses implements store.Shared: several `rap serve`
// processes may share a PostgreSQL store.
func (s *Store) SharedByProcesses() bool { return true }

// Where returns host:port/database of the store, for logs.
func (s *Store) Where() string { return s.where }

// Close closes every connection of the pool, once the transactions under
// way have ended; later calls fail with store.ErrClosed. Calling Close
// again does nothing.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.pool.Close()
	return nil
}

// maxAttempts bounds how often Update runs fn when every attempt meets a
// serialization failure.
const maxAttempts = 100

// Update implements store.Store: fn runs in a SERIALIZABLE transaction,
// run again (after a short random pause) when PostgreSQL reports a
// serialization failure or a deadlock.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.closed.Load() {
		return s.closedErr()
	}
	pause := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.run(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, fn)
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return err
		}
		s.txc.retries.Add(1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause/2 + rand.N(pause)):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// View implements store.Store: one READ ONLY, REPEATABLE READ transaction.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	if s.closed.Load() {
		return s.closedErr()
	}
	return s.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// ReadOne runs fn outside a transaction: each statement it runs sees what
// was committed when that statement started, so one read is consistent on
// its own but several are not with one another. For a single read it
// spares the BEGIN and the ROLLBACK of View, two of its three exchanges
// with the database.
func (s *Store) ReadOne(ctx context.Context, fn func(store.Tx) error) error {
	if s.closed.Load() {
		return s.closedErr()
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres store %s: read: %w", s.where, err)
	}
	defer conn.Release()
	return fn(&tx{s: s, ctx: ctx, conn: conn, now: time.Now().UTC().Truncate(time.Microsecond)})
}

// QuickView implements store.Store; it is View.
func (s *Store) QuickView(ctx context.Context, fn func(store.Tx) error) error {
	return s.View(ctx, fn)
}

// closedErr is the error of a call after Close.
func (s *Store) closedErr() error {
	return fmt.Errorf("postgres store %s: %w", s.where, store.ErrClosed)
}

// errRetry wraps the error of an attempt that met a serialization failure.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

func retryable(err error) bool {
	var r errRetry
	return errors.As(err, &r)
}

// serializationFailure reports whether err is PostgreSQL asking for the
// transaction to be retried.
func serializationFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// run runs fn in one transaction with opts, committing when fn returns
// nil and the transaction is read-write.
func (s *Store) run(ctx context.Context, opts pgx.TxOptions, fn func(store.Tx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres store %s: begin transaction: %w", s.where, err)
	}
	t := &tx{s: s, ctx: ctx, conn: conn, begin: beginSQL(opts), now: time.Now().UTC().Truncate(time.Microsecond)}
	err = fn(t)
	if err != nil || opts.AccessMode == pgx.ReadOnly {
		t.end(ctx, false)
		if opts.AccessMode == pgx.ReadOnly {
			s.txc.views.Add(1)
		} else if t.conflict == nil {
			s.txc.rollbacks.Add(1)
		}
		if t.conflict != nil {
			// A statement met a serialization failure; whatever fn made of
			// it, the attempt is void.
			return errRetry{t.conflict}
		}
		return err
	}
	if err := t.end(ctx, true); err != nil {
		if t.conflict != nil {
			return errRetry{t.conflict}
		}
		if serializationFailure(err) {
			return errRetry{fmt.Errorf("postgres store %s: commit: %w", s.where, err)}
		}
		return fmt.Errorf("postgres store %s: commit: %w", s.where, err)
	}
	s.txc.commits.Add(1)
	return nil
}

// migrationLock is the advisory lock key Open holds while migrating.
const migrationLock = 0x676f726170 // "gorap"

func (s *Store) migrate(ctx context.Context) error {
	for {
		done, err := s.migrateOne(ctx)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next migration, reporting done when there is none.
func (s *Store) migrateOne(ctx context.Context) (done bool, err error) {
	t, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("postgres store %s: begin migration: %w", s.where, err)
	}
	defer t.Rollback(context.WithoutCancel(ctx))
	if _, err := t.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return false, fmt.Errorf("postgres store %s: lock for migration: %w", s.where, err)
	}
	if _, err := t.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return false, fmt.Errorf("postgres store %s: create schema_version table: %w (does the user may create tables in the schema?)", s.where, err)
	}
	var v int
	err = t.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := t.Exec(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return false, fmt.Errorf("postgres store %s: init schema_version: %w", s.where, err)
		}
	case err != nil:
		return false, fmt.Errorf("postgres store %s: read schema version: %w", s.where, err)
	}
	if v > len(migrations) {
		return false, fmt.Errorf("postgres store %s: schema version %d is newer than this program knows (%d); use a newer gorap or another database", s.where, v, len(migrations))
	}
	if v == len(migrations) {
		return true, t.Commit(ctx)
	}
	if _, err := t.Exec(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("postgres store %s: migration %d: %w", s.where, v+1, err)
	}
	if _, err := t.Exec(ctx, `UPDATE schema_version SET version = $1`, v+1); err != nil {
		return false, fmt.Errorf("postgres store %s: record schema version %d: %w", s.where, v+1, err)
	}
	return false, t.Commit(ctx)
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

// migrations are applied in order; migration i brings the schema to
// version i+1. Never edit a released migration: append a new one.
var migrations = []string{
	// 1: the schema of SQLite's migrations 1 to 8.
	`CREATE TABLE threads (
		id TEXT PRIMARY KEY,
		parent_id TEXT REFERENCES threads(id),
		root_id TEXT NOT NULL,
		status TEXT NOT NULL,
		created TIMESTAMPTZ NOT NULL,
		origin_call_id TEXT NOT NULL DEFAULT '',
		origin_tool TEXT NOT NULL DEFAULT '',
		origin_args BYTEA,
		inherit_seq BIGINT NOT NULL DEFAULT 0,
		user_id TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX threads_created ON threads(created, id);
	CREATE INDEX threads_parent_created ON threads(parent_id, created, id);
	CREATE TABLE messages (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		seq BIGINT NOT NULL,
		role TEXT NOT NULL,
		text BYTEA NOT NULL,
		tool_calls BYTEA,
		tool_results BYTEA,
		created TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, seq)
	);
	CREATE TABLE inbox (
		id BIGSERIAL PRIMARY KEY,
		thread_id TEXT NOT NULL REFERENCES threads(id),
		kind TEXT NOT NULL,
		payload BYTEA NOT NULL,
		dedup_key BYTEA NOT NULL UNIQUE,
		created TIMESTAMPTZ NOT NULL
	);
	CREATE INDEX inbox_thread ON inbox(thread_id, id);
	CREATE TABLE seen_keys (
		key BYTEA PRIMARY KEY,
		thread_id TEXT NOT NULL,
		created TIMESTAMPTZ NOT NULL
	);
	CREATE TABLE calls (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		tool_name TEXT NOT NULL,
		arguments BYTEA NOT NULL,
		toolset TEXT NOT NULL,
		endpoint TEXT NOT NULL,
		turn_seq BIGINT NOT NULL,
		state TEXT NOT NULL,
		deadline TIMESTAMPTZ,
		created TIMESTAMPTZ NOT NULL,
		updated TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE INDEX calls_state ON calls(state, deadline);
	CREATE INDEX calls_thread_state ON calls(thread_id, state);
	CREATE TABLE subscriptions (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		tool_name TEXT NOT NULL,
		state TEXT NOT NULL,
		created TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE TABLE views (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		view_type TEXT NOT NULL,
		content BYTEA NOT NULL,
		updated TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, view_type)
	);
	CREATE TABLE timers (
		id TEXT PRIMARY KEY,
		thread_id TEXT NOT NULL REFERENCES threads(id),
		kind TEXT NOT NULL,
		payload BYTEA,
		due TIMESTAMPTZ NOT NULL,
		created TIMESTAMPTZ NOT NULL
	);
	CREATE INDEX timers_due ON timers(due);
	CREATE TABLE toolset_cache (
		root_id TEXT NOT NULL REFERENCES threads(id),
		base_url TEXT NOT NULL,
		manifest BYTEA NOT NULL,
		fetched TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (root_id, base_url)
	);
	CREATE INDEX toolset_cache_url ON toolset_cache(base_url, fetched);
	CREATE TABLE choices (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		tool_name TEXT NOT NULL,
		prompt BYTEA NOT NULL,
		choices BYTEA NOT NULL,
		default_index INTEGER NOT NULL,
		response_url BYTEA NOT NULL,
		created TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE TABLE held_events (
		id BIGSERIAL PRIMARY KEY,
		thread_id TEXT NOT NULL REFERENCES threads(id),
		call_id TEXT NOT NULL,
		payload BYTEA NOT NULL,
		created TIMESTAMPTZ NOT NULL
	);
	CREATE INDEX held_events_call ON held_events(thread_id, call_id, id);
	CREATE TABLE call_checks (
		thread_id TEXT NOT NULL,
		call_id TEXT NOT NULL,
		due TIMESTAMPTZ NOT NULL,
		failures INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE INDEX call_checks_due ON call_checks(due);`,
	// 2: leases of threads and claims of timers, the callback keys and
	// short-lived oauth links (shared.go).
	`CREATE TABLE thread_leases (
		thread_id TEXT PRIMARY KEY,
		owner TEXT NOT NULL,
		until TIMESTAMPTZ NOT NULL
	);
	ALTER TABLE timers ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
	ALTER TABLE timers ADD COLUMN claim_until TIMESTAMPTZ;
	CREATE TABLE callback_keys (
		id INTEGER PRIMARY KEY CHECK (id = 1),
		current BYTEA NOT NULL,
		previous BYTEA,
		previous_until TIMESTAMPTZ
	);
	CREATE TABLE oauth_links (
		thread_id TEXT NOT NULL,
		call_id TEXT NOT NULL,
		event BYTEA NOT NULL,
		created TIMESTAMPTZ NOT NULL,
		expires TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, call_id)
	);
	CREATE INDEX oauth_links_expires ON oauth_links(expires);`,
	// 3: the recent client events of each thread and each thread's last
	// event id (events.go).
	`CREATE TABLE thread_event_heads (
		thread_id TEXT PRIMARY KEY,
		last_id BIGINT NOT NULL
	);
	CREATE TABLE thread_events (
		thread_id TEXT NOT NULL,
		id BIGINT NOT NULL,
		type TEXT NOT NULL,
		data BYTEA NOT NULL,
		msg_seq BIGINT NOT NULL DEFAULT 0,
		created TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, id)
	);
	CREATE INDEX thread_events_created ON thread_events(created);`,
	// 4: SQLite's migration 11: the indexes on a call's
	// state keep only pending calls (pendingCalls), so they stay small: a
	// state change writes a few hot index pages instead of pages spread
	// over an index of every call ever made. Built while the table is
	// locked for writes (0.5 s for a million calls:
	// BenchmarkMigrationToPartialCallIndexes).
	`DROP INDEX calls_state;
	DROP INDEX calls_thread_state;
	CREATE INDEX calls_pending ON calls(state, deadline) WHERE ` + pendingCalls + `;
	CREATE INDEX calls_pending_thread ON calls(thread_id, state) WHERE ` + pendingCalls + `;`,
	// 5: SQLite's migration 12: the digest each session trusted on first
	// use for a tool server's discovery document (store.ToolsetTrust).
	`CREATE TABLE toolset_trust (
		root_id TEXT NOT NULL REFERENCES threads(id),
		base_url TEXT NOT NULL,
		sha256 TEXT NOT NULL,
		PRIMARY KEY (root_id, base_url)
	);`,
	// 6: SQLite's migration 13: one user's threads listed by page.
	`CREATE INDEX threads_user_created ON threads(user_id, created, id);`,
	// 7: SQLite's migration 14: whole sessions read and deleted, and the
	// moves of sessions between runtimes.
	`CREATE INDEX threads_root_created ON threads(root_id, created, id);
	CREATE INDEX seen_keys_thread ON seen_keys(thread_id);
	CREATE TABLE session_moves (
		root_id TEXT NOT NULL,
		direction TEXT NOT NULL,
		id TEXT NOT NULL,
		state TEXT NOT NULL,
		peer TEXT NOT NULL,
		secret TEXT NOT NULL DEFAULT '',
		data BYTEA,
		created TIMESTAMPTZ NOT NULL,
		updated TIMESTAMPTZ NOT NULL,
		expires TIMESTAMPTZ,
		PRIMARY KEY (root_id, direction)
	);`,
	// 8: SQLite's migration 15: a message's token usage.
	`ALTER TABLE messages ADD COLUMN usage BYTEA;`,
	// 9: SQLite's migration 16: compactions.
	`CREATE TABLE compactions (
		thread_id TEXT NOT NULL REFERENCES threads(id),
		upto_seq BIGINT NOT NULL,
		summary BYTEA NOT NULL,
		messages INTEGER NOT NULL,
		usage BYTEA,
		created TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (thread_id, upto_seq)
	);`,
	// SQLite's migration of the same name: the block of a compaction the
	// model's API made itself, as it sent it; NULL for gorap's own.
	`ALTER TABLE compactions ADD COLUMN block BYTEA;`,
	// Sessions' titles and archiving (SQLite's migration of the same
	// name): the title a person gave, the start of the first user
	// message (NULL until Open derived it for a thread older than this
	// column: backfillFirstMessages), their folded search text (text, so
	// that LIKE compares it; store.SearchFold keeps it free of NUL bytes)
	// and the archived flag, all on the root thread. Adding a column with
	// a constant default rewrites no row.
	`ALTER TABLE threads ADD COLUMN title BYTEA NOT NULL DEFAULT ''::bytea;
	ALTER TABLE threads ADD COLUMN first_message BYTEA;
	ALTER TABLE threads ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
	ALTER TABLE threads ADD COLUMN archived BOOLEAN NOT NULL DEFAULT false;
	CREATE INDEX threads_first_message_unset ON threads(id) WHERE first_message IS NULL;`,
	// SQLite's migration of the same name: the pending calls in the
	// order they were made (store.Calls.OldestPendingCalls).
	`CREATE INDEX calls_pending_created ON calls(created, thread_id, call_id) WHERE ` + pendingCalls + `;`,
	// User inputs (the user_input gorap extension) wait in choices, with
	// their form in fields (NULL for a user choice).
	`ALTER TABLE choices ADD COLUMN fields BYTEA;`,
}

// pendingCalls is the condition of the partial indexes on calls
// (migration 4). PostgreSQL uses such an index only for a query whose
// WHERE clause implies this condition at planning time, which a parameter
// (state = $1) does not; so every query for pending calls is written with
// it.
const pendingCalls = backend.PendingCondition

// The queries for pending calls, each with the partial indexes' condition
// (TestPendingCallQueriesUseThePartialIndexes).
const (
	pendingCallsSQL        = `SELECT ` + callCols + ` FROM calls WHERE thread_id = $1 AND ` + pendingCalls + ` ORDER BY created, call_id`
	callsInPendingStateSQL = `SELECT ` + callCols + ` FROM calls WHERE ` + pendingCalls + ` AND state = $1 ORDER BY created, call_id`
	dueCallsSQL            = `SELECT ` + callCols + ` FROM calls WHERE ` + pendingCalls + ` AND deadline IS NOT NULL AND deadline <= $1 ORDER BY deadline`
	nextDeadlineSQL        = `SELECT MIN(deadline) FROM calls WHERE ` + pendingCalls + ` AND deadline IS NOT NULL`
	// oldestPendingCallsSQL and the same for one user's threads take the
	// cursor (created, thread id, call id) and the limit.
	oldestPendingCallsSQL = `SELECT ` + callCols + ` FROM calls WHERE ` + pendingCalls + ` AND (created, thread_id, call_id) > ($1, $2, $3)
		ORDER BY created, thread_id, call_id LIMIT $4`
	oldestUserPendingCallsSQL = `SELECT ` + callCols + ` FROM calls WHERE ` + pendingCalls + ` AND (created, thread_id, call_id) > ($1, $2, $3)
		AND thread_id IN (SELECT id FROM threads WHERE user_id = $5) ORDER BY created, thread_id, call_id LIMIT $4`
)
