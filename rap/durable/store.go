// Package durable keeps a RAP tool server's state in a SQLite file: the
// outbox of callback messages not yet delivered and the active
// subscriptions. A *Store satisfies rap.Store, so a tool server given it as
// rap.ServerOptions.Store loses no result across a crash or restart
// (RAP IN-4) and can resume its subscriptions (RAP SU-1); a bare
// rap.Sender takes it as rap.SenderOptions.Outbox.
//
// The file uses SQLite's write-ahead log with synchronous=FULL: once
// Enqueue returns, the message survives the process being killed and, as
// far as the disk keeps its promises, the machine losing power. Several
// processes may open the same file; SQLite serializes their writes.
package durable

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/rap"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Limits on what the store accepts.
const (
	// MaxKeyBytes is the longest outbox key accepted.
	MaxKeyBytes = 256
	// MaxURLBytes is the longest callback URL accepted.
	MaxURLBytes = rap.MaxCallbackURLBytes
	// MaxBodyBytes is the largest message body accepted.
	MaxBodyBytes = rap.MaxCallbackBytes
	// MaxPending is the largest limit Pending honours.
	MaxPending = 10000
	// MaxRecordBytes is the largest encoded subscription record accepted.
	MaxRecordBytes = 1 << 20
	// MaxIDBytes is the longest group id or subscription id accepted.
	MaxIDBytes = 1024
)

// busyTimeout is how long a statement waits for another connection or
// process holding the write lock before failing with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// maxBatch is the most writes committed in one transaction.
const maxBatch = 256

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("durable: store is closed")

// Store is a SQLite-backed rap.Store. It is safe for concurrent use, and
// several processes may share one file.
//
// Writes from one process go through a single writer goroutine that
// commits the writes waiting at that moment in one transaction (group
// commit), so concurrent senders share the cost of each fsync instead of
// queueing for the file lock one by one.
type Store struct {
	db   *sql.DB
	path string

	writes    chan *writeOp // unbuffered: a send succeeds only if the writer takes it
	closed    chan struct{}
	closeOnce sync.Once
	writerEnd chan struct{}
}

// writeOp is one write waiting for the writer goroutine.
type writeOp struct {
	what  string // for error messages, e.g. "Enqueue k1"
	exec  func(ctx context.Context, tx *sql.Tx) error
	state atomic.Int32 // opQueued, opTaken or opCancelled
	done  chan error   // buffered(1)
}

const (
	opQueued int32 = iota
	opTaken
	opCancelled
)

var (
	_ rap.Store             = (*Store)(nil)
	_ rap.SequencedOutbox   = (*Store)(nil)
	_ rap.DestinationOutbox = (*Store)(nil)
	_ rap.DeadLetterStore   = (*Store)(nil)
	_ rap.CallStateJournal  = (*Store)(nil)
)

// Open opens or creates the SQLite database at path and brings its schema
// up to date. Close it when done.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("durable: Open: empty path; pass the file to keep the tool server's outbox and subscriptions in")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("durable: Open %q: the path must not contain '?' or '#'", path)
	}
	// The file, and the -wal and -shm files SQLite gives its mode, hold
	// results and callback URLs (credentials): 0600 whatever the umask.
	if err := privfile.PrepareSQLite(path); err != nil {
		return nil, fmt.Errorf("durable: Open: %w; check that the directory exists and is writable", err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("durable: Open %s: %w", path, err)
	}
	s := &Store{db: db, path: path, writes: make(chan *writeOp), closed: make(chan struct{}), writerEnd: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 2*busyTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("durable: Open %s: %w; check that the directory exists and is writable", path, err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("durable: Open %s: %w", path, err)
	}
	if err := privfile.CheckSQLite(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("durable: Open: %w", err)
	}
	go s.writer()
	return s, nil
}

// Close waits for the write being committed, if any, and closes the
// database. Calls made after Close return ErrClosed.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		<-s.writerEnd
		if cerr := s.db.Close(); cerr != nil {
			err = fmt.Errorf("durable: closing %s: %w", s.path, cerr)
		}
	})
	return err
}

// write hands exec to the writer goroutine and waits for its commit. If ctx
// ends before the writer has taken the write, it is never applied.
func (s *Store) write(ctx context.Context, what string, exec func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("durable: %s: %w", what, err)
	}
	op := &writeOp{what: what, exec: exec, done: make(chan error, 1)}
	select {
	case s.writes <- op:
	case <-s.closed:
		return fmt.Errorf("durable: %s: %w", what, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("durable: %s: %w", what, ctx.Err())
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opCancelled) {
			return fmt.Errorf("durable: %s: %w", what, ctx.Err())
		}
		// The writer has it: its outcome is the truth, and a commit
		// is bounded by the busy timeout.
		return <-op.done
	}
}

// writer commits writes in batches until Close.
func (s *Store) writer() {
	defer close(s.writerEnd)
	for {
		var first *writeOp
		select {
		case first = <-s.writes:
		case <-s.closed:
			return
		}
		batch := []*writeOp{first}
	gather:
		for len(batch) < maxBatch {
			select {
			case op := <-s.writes:
				batch = append(batch, op)
			default:
				break gather
			}
		}
		s.commit(batch)
	}
}

// commit applies batch in one transaction. If that fails, each write is
// retried in its own transaction, so one bad write fails only itself.
func (s *Store) commit(batch []*writeOp) {
	live := batch[:0]
	for _, op := range batch {
		if op.state.CompareAndSwap(opQueued, opTaken) {
			live = append(live, op)
		}
	}
	if len(live) == 0 {
		return
	}
	// The writes are not tied to any caller's context: a caller that
	// gives up after the writer took its write still learns the outcome.
	ctx, cancel := context.WithTimeout(context.Background(), 2*busyTimeout)
	defer cancel()
	err := s.inTx(ctx, live)
	if err == nil || len(live) == 1 {
		for _, op := range live {
			op.done <- wrapWrite(op, s.path, err)
		}
		return
	}
	for _, op := range live {
		op.done <- wrapWrite(op, s.path, s.inTx(ctx, []*writeOp{op}))
	}
}

func wrapWrite(op *writeOp, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("durable: %s in %s: %w", op.what, path, err)
}

// inTx runs ops in one IMMEDIATE transaction.
func (s *Store) inTx(ctx context.Context, ops []*writeOp) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, op := range ops {
		if err := op.exec(ctx, tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// execWrite is a write of one statement.
func (s *Store) execWrite(ctx context.Context, what, query string, args ...any) error {
	return s.write(ctx, what, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	})
}

// migrations are applied in order; entry i brings the schema to version
// i+1. Never edit an entry once released: append a new one.
var migrations = []string{
	// 1: the outbox and the subscriptions.
	`CREATE TABLE outbox (
		seq      INTEGER PRIMARY KEY AUTOINCREMENT, -- enqueue order
		key      TEXT    NOT NULL UNIQUE,
		url      TEXT    NOT NULL,
		body     BLOB    NOT NULL,
		attempts INTEGER NOT NULL DEFAULT 0,
		created  INTEGER NOT NULL                   -- Unix nanoseconds
	);
	CREATE TABLE subscriptions (
		group_id TEXT    NOT NULL,
		id       TEXT    NOT NULL,
		created  INTEGER NOT NULL,                  -- Unix nanoseconds
		record   BLOB    NOT NULL,                  -- rap.SubscriptionRecord as JSON
		PRIMARY KEY (group_id, id)
	);`,
	// 2: the journal of accepted calls whose result is not stored yet.
	`CREATE TABLE calls (
		group_id     TEXT    NOT NULL,
		id           TEXT    NOT NULL,
		call_id      TEXT    NOT NULL,
		operation    TEXT    NOT NULL,
		callback_url TEXT    NOT NULL,
		accepted     INTEGER NOT NULL,               -- Unix nanoseconds
		PRIMARY KEY (group_id, id)
	);`,
	// 3: callbacks Sender.Run stopped delivering.
	`CREATE TABLE dead_letters (
		key      TEXT    PRIMARY KEY,
		url      TEXT    NOT NULL,
		body     BLOB    NOT NULL,
		attempts INTEGER NOT NULL,
		created  INTEGER NOT NULL,                  -- Unix nanoseconds
		dead_at  INTEGER NOT NULL,                  -- Unix nanoseconds
		status   INTEGER NOT NULL,                  -- last HTTP status, 0 for none
		reason   TEXT    NOT NULL
	);
	CREATE INDEX dead_letters_dead_at ON dead_letters (dead_at);`,
	// 4: the state a resumable call saved (rap.Call.SaveState).
	`ALTER TABLE calls ADD COLUMN state BLOB;`,
	// 5: the W3C trace context of a call and of a callback (NULL: none),
	// sent with the callbacks (rap.CallRecord.TraceParent).
	`ALTER TABLE calls ADD COLUMN traceparent TEXT;
	ALTER TABLE calls ADD COLUMN tracestate TEXT;
	ALTER TABLE outbox ADD COLUMN traceparent TEXT;
	ALTER TABLE outbox ADD COLUMN tracestate TEXT;`,
	// 6: the invocation a message that names no call is about (NULL:
	// none), which keeps it in that call's delivery order
	// (rap.OutboxMessage.ForID).
	`ALTER TABLE outbox ADD COLUMN for_id TEXT;`,
}

// migrate applies the migrations the file has not seen yet, each in its
// own transaction, recording them in schema_migrations.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	for i, stmt := range migrations {
		version := i + 1
		if err := s.applyMigration(ctx, version, stmt); err != nil {
			return fmt.Errorf("schema migration %d: %w", version, err)
		}
	}
	var newest int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if newest > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this program knows (%d); upgrade gorap", newest, len(migrations))
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, version int, stmt string) error {
	tx, err := s.db.BeginTx(ctx, nil) // IMMEDIATE: one process migrates at a time
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, stmt); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// SchemaVersion reports the schema version of the open file.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("durable: reading schema version of %s: %w", s.path, err)
	}
	return v, nil
}

// Enqueue stores m durably. A second Enqueue with the same Key keeps the
// first message and succeeds, so callers may retry a failed Enqueue safely.
// m.Created defaults to now; m.Attempts is stored as given.
func (s *Store) Enqueue(ctx context.Context, m rap.OutboxMessage) error {
	switch {
	case m.Key == "":
		return errors.New("durable: Enqueue: empty Key; give every message a unique key")
	case len(m.Key) > MaxKeyBytes:
		return fmt.Errorf("durable: Enqueue: Key is %d bytes, over the %d-byte limit", len(m.Key), MaxKeyBytes)
	case m.URL == "":
		return fmt.Errorf("durable: Enqueue %s: empty URL; pass the invocation's callback_url", m.Key)
	case len(m.URL) > MaxURLBytes:
		return fmt.Errorf("durable: Enqueue %s: URL is %d bytes, over the %d-byte limit", m.Key, len(m.URL), MaxURLBytes)
	case len(m.Body) == 0:
		return fmt.Errorf("durable: Enqueue %s: empty Body; a callback is a JSON object", m.Key)
	case len(m.Body) > MaxBodyBytes:
		return fmt.Errorf("durable: Enqueue %s: Body is %d bytes, over the %d-byte limit", m.Key, len(m.Body), MaxBodyBytes)
	}
	created := m.Created
	if created.IsZero() {
		created = time.Now()
	}
	if m.EndsGroupID == "" && m.EndsID == "" {
		return s.execWrite(ctx, "Enqueue "+m.Key,
			`INSERT INTO outbox (key, url, body, attempts, created, traceparent, tracestate, for_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (key) DO NOTHING`,
			m.Key, m.URL, m.Body, m.Attempts, created.UnixNano(), nullable(m.TraceParent), nullable(m.TraceState), nullable(m.ForID))
	}
	// The message answers a journaled call: store it and forget the call
	// in one transaction.
	return s.write(ctx, "Enqueue "+m.Key, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (key, url, body, attempts, created, traceparent, tracestate, for_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO NOTHING`, m.Key, m.URL, m.Body, m.Attempts, created.UnixNano(), nullable(m.TraceParent), nullable(m.TraceState), nullable(m.ForID)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM calls WHERE group_id = ? AND id = ?`, m.EndsGroupID, m.EndsID)
		return err
	})
}

// Pending returns up to limit undelivered messages in enqueue order.
// A limit above MaxPending is reduced to it.
func (s *Store) Pending(ctx context.Context, limit int) ([]rap.OutboxMessage, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("durable: Pending: limit %d; ask for at least one message", limit)
	}
	limit = min(limit, MaxPending)
	return readAll(ctx, s, "Pending", `SELECT key, url, body, attempts, created, COALESCE(traceparent, ''), COALESCE(tracestate, ''), COALESCE(for_id, '') FROM outbox ORDER BY seq LIMIT ?`,
		func(rows *sql.Rows) (rap.OutboxMessage, error) {
			var m rap.OutboxMessage
			var created int64
			err := rows.Scan(&m.Key, &m.URL, &m.Body, &m.Attempts, &created, &m.TraceParent, &m.TraceState, &m.ForID)
			m.Created = time.Unix(0, created)
			return m, err
		}, limit)
}

// PendingAfter returns up to limit undelivered messages enqueued after the
// one numbered after (0 for the start), in enqueue order, with their
// sequence numbers. It implements rap.SequencedOutbox, which lets a
// Sender read each message once however large the backlog.
func (s *Store) PendingAfter(ctx context.Context, after int64, limit int) ([]rap.SequencedMessage, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("durable: PendingAfter: limit %d; ask for at least one message", limit)
	}
	limit = min(limit, MaxPending)
	return readAll(ctx, s, "PendingAfter", `SELECT seq, key, url, body, attempts, created, COALESCE(traceparent, ''), COALESCE(tracestate, ''), COALESCE(for_id, '') FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?`,
		func(rows *sql.Rows) (rap.SequencedMessage, error) {
			var m rap.SequencedMessage
			var created int64
			err := rows.Scan(&m.Seq, &m.Key, &m.URL, &m.Body, &m.Attempts, &created, &m.TraceParent, &m.TraceState, &m.ForID)
			m.Created = time.Unix(0, created)
			return m, err
		}, after, limit)
}

// Attempted counts one failed delivery attempt of the message with key.
// An unknown key is not an error: the message may have been delivered by
// another process meanwhile.
func (s *Store) Attempted(ctx context.Context, key string) error {
	return s.execWrite(ctx, "Attempted "+key, `UPDATE outbox SET attempts = attempts + 1 WHERE key = ?`, key)
}

// Delivered removes the message with key. An unknown key is not an error.
func (s *Store) Delivered(ctx context.Context, key string) error {
	return s.execWrite(ctx, "Delivered "+key, `DELETE FROM outbox WHERE key = ?`, key)
}

// SaveSubscription inserts or replaces the record for its invocation's
// (GroupID, ID). The invocation's ID, GroupID and CallbackURL are required,
// since they are what a restarted tool server needs to keep sending events
// (RAP SU-1).
func (s *Store) SaveSubscription(ctx context.Context, r rap.SubscriptionRecord) error {
	inv := r.Invocation
	switch {
	case inv.GroupID == "":
		return errors.New("durable: SaveSubscription: invocation.group_id is empty; save the invocation the subscription came from")
	case inv.ID == "":
		return fmt.Errorf("durable: SaveSubscription (group %s): invocation.id is empty; save the invocation the subscription came from", inv.GroupID)
	case inv.CallbackURL == "":
		return fmt.Errorf("durable: SaveSubscription %s/%s: invocation.callback_url is empty; events could never be delivered", inv.GroupID, inv.ID)
	case len(inv.GroupID) > MaxIDBytes || len(inv.ID) > MaxIDBytes:
		return fmt.Errorf("durable: SaveSubscription: group id or id is over the %d-byte limit", MaxIDBytes)
	}
	if len(r.State) > 0 && !json.Valid(r.State) {
		return fmt.Errorf("durable: SaveSubscription %s/%s: state is not valid JSON", inv.GroupID, inv.ID)
	}
	if r.Created.IsZero() {
		r.Created = time.Now()
	}
	rec, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("durable: SaveSubscription %s/%s: encoding the record: %w", inv.GroupID, inv.ID, err)
	}
	if len(rec) > MaxRecordBytes {
		return fmt.Errorf("durable: SaveSubscription %s/%s: record is %d bytes, over the %d-byte limit; keep large state elsewhere", inv.GroupID, inv.ID, len(rec), MaxRecordBytes)
	}
	return s.execWrite(ctx, "SaveSubscription "+inv.GroupID+"/"+inv.ID,
		`INSERT INTO subscriptions (group_id, id, created, record) VALUES (?, ?, ?, ?)
		 ON CONFLICT (group_id, id) DO UPDATE SET created = excluded.created, record = excluded.record`,
		inv.GroupID, inv.ID, r.Created.UnixNano(), rec)
}

// DeleteSubscription forgets one subscription; unknown ids are not an error.
func (s *Store) DeleteSubscription(ctx context.Context, groupID, id string) error {
	return s.execWrite(ctx, "DeleteSubscription "+groupID+"/"+id, `DELETE FROM subscriptions WHERE group_id = ? AND id = ?`, groupID, id)
}

// ListSubscriptions returns every stored subscription, oldest first.
func (s *Store) ListSubscriptions(ctx context.Context) ([]rap.SubscriptionRecord, error) {
	return readAll(ctx, s, "ListSubscriptions", `SELECT group_id, id, record FROM subscriptions ORDER BY created, group_id, id`,
		func(rows *sql.Rows) (rap.SubscriptionRecord, error) {
			var groupID, id string
			var rec []byte
			var r rap.SubscriptionRecord
			if err := rows.Scan(&groupID, &id, &rec); err != nil {
				return r, err
			}
			if err := json.Unmarshal(rec, &r); err != nil {
				return r, fmt.Errorf("record %s/%s is corrupt: %w", groupID, id, err)
			}
			return r, nil
		})
}

// BeginCall records an accepted invocation until EndCall (rap.CallJournal).
// It returns once the record is synced to disk. An empty callback URL is a
// call run synchronously (rap.Server.Invoke).
func (s *Store) BeginCall(ctx context.Context, r rap.CallRecord) error {
	switch {
	case r.GroupID == "" || r.ID == "":
		return errors.New("durable: BeginCall: empty group id or id; record the invocation's group_id and id")
	case len(r.GroupID) > MaxIDBytes || len(r.ID) > MaxIDBytes || len(r.CallID) > MaxIDBytes || len(r.Operation) > MaxIDBytes:
		return fmt.Errorf("durable: BeginCall: an id or the operation is over the %d-byte limit", MaxIDBytes)
	case len(r.CallbackURL) > MaxURLBytes:
		return fmt.Errorf("durable: BeginCall %s/%s: callback URL is %d bytes, over the %d-byte limit", r.GroupID, r.ID, len(r.CallbackURL), MaxURLBytes)
	}
	if r.Accepted.IsZero() {
		r.Accepted = time.Now()
	}
	return s.execWrite(ctx, "BeginCall "+r.GroupID+"/"+r.ID,
		`INSERT INTO calls (group_id, id, call_id, operation, callback_url, accepted, traceparent, tracestate) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (group_id, id) DO NOTHING`,
		r.GroupID, r.ID, r.CallID, r.Operation, r.CallbackURL, r.Accepted.UnixNano(), nullable(r.TraceParent), nullable(r.TraceState))
}

// EndCall forgets a call recorded by BeginCall (rap.CallJournal); unknown
// ids are not an error.
func (s *Store) EndCall(ctx context.Context, groupID, id string) error {
	return s.execWrite(ctx, "EndCall "+groupID+"/"+id, `DELETE FROM calls WHERE group_id = ? AND id = ?`, groupID, id)
}

// SaveCallState stores the state of a recorded call, replacing the one
// saved before (rap.CallStateJournal). A call that is not recorded is left
// unrecorded. It returns once the state is synced to disk.
func (s *Store) SaveCallState(ctx context.Context, groupID, id string, state []byte) error {
	if len(state) > rap.MaxCallStateBytes {
		return fmt.Errorf("durable: SaveCallState %s/%s: the state is %d bytes, over the %d-byte limit", groupID, id, len(state), rap.MaxCallStateBytes)
	}
	return s.execWrite(ctx, "SaveCallState "+groupID+"/"+id, `UPDATE calls SET state = ? WHERE group_id = ? AND id = ?`, state, groupID, id)
}

// UnfinishedCalls returns the calls recorded and not ended, oldest first,
// with the state each saved (rap.CallJournal, rap.CallStateJournal).
func (s *Store) UnfinishedCalls(ctx context.Context) ([]rap.CallRecord, error) {
	return readAll(ctx, s, "UnfinishedCalls", `SELECT group_id, id, call_id, operation, callback_url, accepted, state,
		COALESCE(traceparent, ''), COALESCE(tracestate, '') FROM calls ORDER BY accepted, group_id, id`,
		func(rows *sql.Rows) (rap.CallRecord, error) {
			var r rap.CallRecord
			var accepted int64
			var state []byte
			err := rows.Scan(&r.GroupID, &r.ID, &r.CallID, &r.Operation, &r.CallbackURL, &accepted, &state, &r.TraceParent, &r.TraceState)
			r.Accepted = time.Unix(0, accepted)
			if len(state) > 0 {
				r.State = state
			}
			return r, err
		})
}

// readAll runs query and returns every row as scan reads it. Errors say
// which operation (what) failed on which file.
func readAll[T any](ctx context.Context, s *Store, what, query string, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("durable: %s from %s: %w", what, s.path, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("durable: %s from %s: %w", what, s.path, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: %s from %s: %w", what, s.path, err)
	}
	return out, nil
}

// nullable stores an empty string as NULL: a column added later (the
// trace context) costs nothing in the rows that have none.
func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
