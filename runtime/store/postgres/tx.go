package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// tx implements store.Tx on one pgx transaction.
type tx struct {
	s    *Store
	ctx  context.Context
	conn *pgxpool.Conn
	// begin is the BEGIN statement still to be sent with the first
	// statement (txconn.go); "" once it was.
	begin string
	now   time.Time
	// conflict is the first serialization failure a statement met: the
	// transaction is void and Update runs fn again, whatever fn returned.
	conflict error
}

var _ store.Tx = (*tx)(nil)

// note records err when it is a serialization failure, and returns it.
func (t *tx) note(err error) error {
	if err != nil && t.conflict == nil && serializationFailure(err) {
		t.conflict = err
	}
	return err
}

// collect reads every row of a query with scan.
func collect[T any](t *tx, what string, scan func(pgx.Rows) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := t.query(sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := scanAll(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, t.note(err))
	}
	return out, nil
}

// scanAll reads every row of rows with scan, and closes them.
func scanAll[T any](rows pgx.Rows, scan func(pgx.Rows) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// bin is s as a bytea parameter, never NULL.
func bin(s string) []byte { return append([]byte{}, s...) }

// binOrNull is b as a nullable bytea parameter: NULL when empty.
func binOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// nullTime is t as a nullable timestamptz parameter: NULL when zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// utc returns a scanned time in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// utcPtr returns a scanned nullable time: zero for NULL.
func utcPtr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return utc(*t)
}

// stamp returns v, or the transaction's time when v is zero.
func (t *tx) stamp(v time.Time) time.Time { return backend.Stamp(v, t.now) }

// Threads

// CreateThread implements store.Threads.
func (t *tx) CreateThread(th store.Thread) error {
	th, err := backend.NewThread(th, t.now, t)
	if err != nil {
		return err
	}
	var parent any
	if th.ParentID != "" {
		parent = th.ParentID
	}
	_, err = t.exec(`INSERT INTO threads (id, parent_id, root_id, status, created, origin_call_id, origin_tool, origin_args, inherit_seq, user_id, title, first_message, search_text, archived)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		th.ID, parent, th.RootID, string(th.Status), th.Created, th.OriginCallID, th.OriginTool, binOrNull(th.OriginArgs), th.InheritSeq, th.UserID,
		bin(th.Title), bin(th.FirstMessage), backend.SearchText(th.Title, th.FirstMessage), th.Archived)
	if err != nil {
		return fmt.Errorf("create thread %s: %w", th.ID, err)
	}
	return nil
}

// threadSQL reads one thread ($1).
const threadSQL = `SELECT ` + threadCols + ` FROM threads WHERE id = $1`

// threadCols are the columns scanThread reads.
const threadCols = `id, COALESCE(parent_id, ''), root_id, status, created, origin_call_id, origin_tool, origin_args, inherit_seq, user_id, title, first_message, archived`

func scanThread(sc interface{ Scan(...any) error }) (store.Thread, error) {
	var th store.Thread
	var args, title, first []byte
	var status string
	err := sc.Scan(&th.ID, &th.ParentID, &th.RootID, &status, &th.Created, &th.OriginCallID, &th.OriginTool, &args, &th.InheritSeq, &th.UserID,
		&title, &first, &th.Archived)
	th.Status = store.ThreadStatus(status)
	th.Title, th.FirstMessage = string(title), string(first)
	th.Created = utc(th.Created)
	if len(args) > 0 {
		th.OriginArgs = json.RawMessage(args)
	}
	return th, err
}

func scanThreadRows(rows pgx.Rows) (store.Thread, error) { return scanThread(rows) }

// Thread implements store.Threads.
func (t *tx) Thread(id string) (store.Thread, error) {
	th, err := scanThread(t.queryRow(threadSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return th, backend.NotFound("thread", id)
	}
	if err != nil {
		return th, fmt.Errorf("read thread %s: %w", id, err)
	}
	return th, nil
}

// ListThreads implements store.Threads.
func (t *tx) ListThreads() ([]store.Thread, error) {
	return collect(t, "list threads", scanThreadRows, `SELECT `+threadCols+` FROM threads ORDER BY created, id`)
}

// SetThreadStatus implements store.Threads.
func (t *tx) SetThreadStatus(id string, s store.ThreadStatus) error {
	tag, err := t.exec(`UPDATE threads SET status = $1 WHERE id = $2`, string(s), id)
	if err != nil {
		return fmt.Errorf("set status of thread %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return backend.NotFound("thread", id)
	}
	return nil
}

// ThreadsPage implements store.Threads with the threads_created index.
func (t *tx) ThreadsPage(after store.ThreadCursor, limit int) ([]store.Thread, error) {
	if after.IsZero() {
		return collect(t, "list threads", scanThreadRows, `SELECT `+threadCols+` FROM threads ORDER BY created, id LIMIT $1`, limit)
	}
	return collect(t, "list threads", scanThreadRows,
		`SELECT `+threadCols+` FROM threads WHERE (created, id) > ($1, $2) ORDER BY created, id LIMIT $3`, after.Created, after.ID, limit)
}

// ChildThreads implements store.Threads with the threads_parent_created
// index.
func (t *tx) ChildThreads(parentID string, after store.ThreadCursor, limit int) ([]store.Thread, error) {
	what := "list the children of thread " + parentID
	if after.IsZero() {
		return collect(t, what, scanThreadRows, `SELECT `+threadCols+` FROM threads WHERE parent_id = $1 ORDER BY created, id LIMIT $2`, parentID, limit)
	}
	return collect(t, what, scanThreadRows,
		`SELECT `+threadCols+` FROM threads WHERE parent_id = $1 AND (created, id) > ($2, $3) ORDER BY created, id LIMIT $4`, parentID, after.Created, after.ID, limit)
}

// UserThreadsPage implements store.Threads with the threads_user_created
// index.
func (t *tx) UserThreadsPage(userID string, after store.ThreadCursor, limit int) ([]store.Thread, error) {
	what := "list the threads of a user"
	if after.IsZero() {
		return collect(t, what, scanThreadRows, `SELECT `+threadCols+` FROM threads WHERE user_id = $1 ORDER BY created, id LIMIT $2`, userID, limit)
	}
	return collect(t, what, scanThreadRows,
		`SELECT `+threadCols+` FROM threads WHERE user_id = $1 AND (created, id) > ($2, $3) ORDER BY created, id LIMIT $4`, userID, after.Created, after.ID, limit)
}

// Messages

// LastSeq implements store.Messages.
func (t *tx) LastSeq(threadID string) (int64, error) {
	last, err := scanLastSeq(t.queryRow(lastSeqSQL, threadID))
	if err != nil {
		return 0, fmt.Errorf("read the last seq of thread %s: %w", threadID, err)
	}
	return last, nil
}

// lastSeqSQL reads what scanLastSeq needs of a thread ($1).
const lastSeqSQL = `SELECT COALESCE((SELECT MAX(seq) FROM messages WHERE thread_id = $1), 0), COALESCE((SELECT inherit_seq FROM threads WHERE id = $1), 0)`

// scanLastSeq reads the seq of a thread's last message: its own, or the
// last it inherited from its parent.
func scanLastSeq(r pgx.Row) (int64, error) {
	var last, inherit int64
	err := r.Scan(&last, &inherit)
	return max(last, inherit), err
}

// AppendMessages implements store.Messages.
func (t *tx) AppendMessages(threadID string, msgs []store.Message) ([]store.Message, error) {
	return backend.AppendMessages(t, threadID, msgs, t.now)
}

// InsertMessages implements backend.MessageWriter, with one statement.
func (t *tx) InsertMessages(threadID string, msgs []store.Message) error {
	args := make([]any, 0, 8*len(msgs))
	var q strings.Builder
	q.WriteString(`INSERT INTO messages (thread_id, seq, role, text, tool_calls, tool_results, created, usage) VALUES `)
	for i, m := range msgs {
		calls, results, err := backend.EncodeMessage(m)
		if err != nil {
			return err
		}
		usage, err := backend.EncodeUsage(m.Usage)
		if err != nil {
			return err
		}
		if i > 0 {
			q.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
		args = append(args, threadID, m.Seq, string(m.Role), bin(m.Text), calls, results, m.Created, usage)
	}
	_, err := t.exec(q.String(), args...)
	return err
}

// History implements store.Messages with the shared history walk.
func (t *tx) History(threadID string) ([]store.Message, error) {
	return backend.History(t, threadID)
}

// HistorySince implements store.Messages with the shared history walk.
func (t *tx) HistorySince(threadID string, after int64) ([]store.Message, error) {
	return backend.HistorySince(t, threadID, after)
}

// OwnMessages implements backend.HistoryReader: the thread's own messages
// with after < seq <= upTo (no upper bound when upTo is negative).
func (t *tx) OwnMessages(threadID string, after, upTo int64) ([]store.Message, error) {
	if upTo < 0 {
		upTo = 1<<63 - 1
	}
	what := "read history of thread " + threadID
	return collect(t, what, func(rows pgx.Rows) (store.Message, error) {
		m := store.Message{ThreadID: threadID}
		var role string
		var text, calls, results, usage []byte
		if err := rows.Scan(&m.Seq, &role, &text, &calls, &results, &m.Created, &usage); err != nil {
			return m, err
		}
		m.Role, m.Text, m.Created = store.Role(role), string(text), utc(m.Created)
		if err := backend.DecodeMessage(&m, calls, results); err != nil {
			return m, fmt.Errorf("message %d: %w", m.Seq, err)
		}
		var err error
		if m.Usage, err = backend.DecodeUsage(usage); err != nil {
			return m, fmt.Errorf("message %d: %w", m.Seq, err)
		}
		return m, nil
	}, `SELECT seq, role, text, tool_calls, tool_results, created, usage FROM messages WHERE thread_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq`, threadID, after, upTo)
}

// Inbox

// MarkKeySeen implements store.Inbox.
func (t *tx) MarkKeySeen(threadID, key string) (bool, error) {
	if key == "" {
		return false, errors.New("mark key seen: empty key")
	}
	tag, err := t.exec(`INSERT INTO seen_keys (key, thread_id, created) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`,
		bin(key), threadID, t.now)
	if err != nil {
		return false, fmt.Errorf("mark key seen for thread %s: %w", threadID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// SeenKey implements store.Inbox.
func (t *tx) SeenKey(key string) (bool, error) {
	var seen bool
	if err := t.queryRow(`SELECT EXISTS (SELECT 1 FROM seen_keys WHERE key = $1)`, bin(key)).Scan(&seen); err != nil {
		return false, fmt.Errorf("look up dedup key: %w", err)
	}
	return seen, nil
}

// Enqueue implements store.Inbox.
func (t *tx) Enqueue(item store.InboxItem) (bool, error) {
	return backend.Enqueue(t, item, t.now)
}

// InsertInboxItem implements backend.Queue. The NOTIFY that wakes the
// thread's processes goes out when the transaction commits (wakeups.go).
func (t *tx) InsertInboxItem(item store.InboxItem) (bool, error) {
	tag, err := t.exec(`WITH ins AS (INSERT INTO inbox (thread_id, kind, payload, dedup_key, created) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (dedup_key) DO NOTHING RETURNING thread_id)
		SELECT pg_notify($6, $7) FROM ins`,
		item.ThreadID, string(item.Kind), []byte(item.Payload), bin(item.DedupKey), item.Created, t.s.wakeChannel, t.s.wakePayload(item.ThreadID))
	if err != nil {
		return false, fmt.Errorf("enqueue %s for thread %s: %w", item.Kind, item.ThreadID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Queued implements store.Inbox.
func (t *tx) Queued(threadID string) ([]store.InboxItem, error) {
	return collect(t, "read inbox of thread "+threadID, scanInbox(threadID), queuedSQL, threadID)
}

// queuedSQL reads a thread's inbox ($1) in order.
const queuedSQL = `SELECT id, kind, payload, dedup_key, created FROM inbox WHERE thread_id = $1 ORDER BY id`

// scanInbox returns the scanner of queuedSQL's rows for threadID.
func scanInbox(threadID string) func(pgx.Rows) (store.InboxItem, error) {
	return func(rows pgx.Rows) (store.InboxItem, error) {
		it := store.InboxItem{ThreadID: threadID}
		var kind string
		var payload, key []byte
		err := rows.Scan(&it.ID, &kind, &payload, &key, &it.Created)
		it.Kind, it.Payload, it.DedupKey, it.Created = store.InboxKind(kind), json.RawMessage(payload), string(key), utc(it.Created)
		return it, err
	}
}

// QueuedThreads implements store.Inbox.
func (t *tx) QueuedThreads() ([]string, error) {
	return collect(t, "list threads with queued messages", func(rows pgx.Rows) (string, error) {
		var id string
		return id, rows.Scan(&id)
	}, `SELECT thread_id FROM inbox GROUP BY thread_id ORDER BY MIN(id)`)
}

// Consume implements store.Inbox.
func (t *tx) Consume(ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	tag, err := t.exec(`DELETE FROM inbox WHERE id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("consume %d inbox items: %w", len(ids), err)
	}
	if n := tag.RowsAffected(); n != int64(len(ids)) {
		return fmt.Errorf("consume %d inbox items: %d no longer queued: %w", len(ids), int64(len(ids))-n, store.ErrConsumed)
	}
	return nil
}

// Calls

const callCols = `thread_id, call_id, tool_name, arguments, toolset, endpoint, turn_seq, state, deadline, created, updated`

func scanCall(sc interface{ Scan(...any) error }) (store.Call, error) {
	var c store.Call
	var args []byte
	var state string
	var deadline *time.Time
	err := sc.Scan(&c.ThreadID, &c.CallID, &c.ToolName, &args, &c.Toolset, &c.Endpoint, &c.TurnSeq, &state, &deadline, &c.Created, &c.Updated)
	c.Arguments, c.State = json.RawMessage(args), store.CallState(state)
	c.Deadline, c.Created, c.Updated = utcPtr(deadline), utc(c.Created), utc(c.Updated)
	return c, err
}

func scanCallRows(rows pgx.Rows) (store.Call, error) { return scanCall(rows) }

// PutCalls implements store.Calls.
func (t *tx) PutCalls(calls []store.Call) error {
	for _, c := range calls {
		c = backend.NewCall(c, t.now)
		if _, err := t.exec(`INSERT INTO calls (thread_id, call_id, tool_name, arguments, toolset, endpoint, turn_seq, state, deadline, created, updated) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			c.ThreadID, c.CallID, c.ToolName, []byte(c.Arguments), c.Toolset, c.Endpoint, c.TurnSeq, string(c.State),
			nullTime(c.Deadline), c.Created, c.Updated); err != nil {
			return fmt.Errorf("record call %s of thread %s: %w", c.CallID, c.ThreadID, err)
		}
	}
	return nil
}

// Call implements store.Calls.
func (t *tx) Call(threadID, callID string) (store.Call, error) {
	c, err := scanCall(t.queryRow(`SELECT `+callCols+` FROM calls WHERE thread_id = $1 AND call_id = $2`, threadID, callID))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, backend.NotFound("call", threadID, callID)
	}
	if err != nil {
		return c, fmt.Errorf("read call %s of thread %s: %w", callID, threadID, err)
	}
	return c, nil
}

// SetCallState implements store.Calls.
func (t *tx) SetCallState(threadID, callID string, to store.CallState, from ...store.CallState) (bool, error) {
	q := `UPDATE calls SET state = $1, updated = $2 WHERE thread_id = $3 AND call_id = $4`
	args := []any{string(to), t.now, threadID, callID}
	if len(from) > 0 {
		states := make([]string, len(from))
		for i, f := range from {
			states[i] = string(f)
		}
		q += ` AND state = ANY($5)`
		args = append(args, states)
	}
	tag, err := t.exec(q, args...)
	if err != nil {
		return false, fmt.Errorf("set state of call %s of thread %s to %s: %w", callID, threadID, to, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CallsInState implements store.Calls.
func (t *tx) CallsInState(s store.CallState) ([]store.Call, error) {
	q := `SELECT ` + callCols + ` FROM calls WHERE state = $1 ORDER BY created, call_id`
	if s.Pending() {
		q = callsInPendingStateSQL
	}
	return collect(t, "list calls in state "+string(s), scanCallRows, q, string(s))
}

// ThreadCalls implements store.Calls.
func (t *tx) ThreadCalls(threadID string) ([]store.Call, error) {
	return collect(t, "list calls of thread "+threadID, scanCallRows,
		`SELECT `+callCols+` FROM calls WHERE thread_id = $1 ORDER BY created, call_id`, threadID)
}

// PendingCalls implements store.Calls.
func (t *tx) PendingCalls(threadID string) ([]store.Call, error) {
	return collect(t, "list pending calls of thread "+threadID, scanCallRows, pendingCallsSQL, threadID)
}

// DueCalls implements store.Calls.
func (t *tx) DueCalls(now time.Time) ([]store.Call, error) {
	return collect(t, "list calls past their deadline", scanCallRows, dueCallsSQL, now)
}

// NextDeadline implements store.Calls.
func (t *tx) NextDeadline() (time.Time, bool, error) {
	var d *time.Time
	if err := t.queryRow(nextDeadlineSQL).Scan(&d); err != nil {
		return time.Time{}, false, fmt.Errorf("read next call deadline: %w", err)
	}
	return utcPtr(d), d != nil, nil
}

// OldestPendingCalls implements store.Calls.
func (t *tx) OldestPendingCalls(userID string, after store.CallCursor, limit int) ([]store.Call, error) {
	if limit < 1 {
		return nil, nil
	}
	args := []any{after.Created, after.ThreadID, after.CallID, limit}
	q := oldestPendingCallsSQL
	if userID != "" {
		q, args = oldestUserPendingCallsSQL, append(args, userID)
	}
	return collect(t, "list the oldest pending calls", scanCallRows, q, args...)
}

// Subscriptions

// PutSubscription implements store.Subscriptions.
func (t *tx) PutSubscription(s store.Subscription) error {
	_, err := t.exec(`INSERT INTO subscriptions (thread_id, call_id, tool_name, state, created) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET tool_name = excluded.tool_name, state = excluded.state`,
		s.ThreadID, s.CallID, s.ToolName, string(s.State), t.stamp(s.Created))
	if err != nil {
		return fmt.Errorf("record subscription %s of thread %s: %w", s.CallID, s.ThreadID, err)
	}
	return nil
}

func scanSubscription(sc interface{ Scan(...any) error }) (store.Subscription, error) {
	var s store.Subscription
	var state string
	err := sc.Scan(&s.ThreadID, &s.CallID, &s.ToolName, &state, &s.Created)
	s.State, s.Created = store.SubscriptionState(state), utc(s.Created)
	return s, err
}

// Subscription implements store.Subscriptions.
func (t *tx) Subscription(threadID, callID string) (store.Subscription, error) {
	s, err := scanSubscription(t.queryRow(`SELECT thread_id, call_id, tool_name, state, created FROM subscriptions WHERE thread_id = $1 AND call_id = $2`, threadID, callID))
	if errors.Is(err, pgx.ErrNoRows) {
		return s, backend.NotFound("subscription", threadID, callID)
	}
	if err != nil {
		return s, fmt.Errorf("read subscription %s of thread %s: %w", callID, threadID, err)
	}
	return s, nil
}

// ThreadSubscriptions implements store.Subscriptions.
func (t *tx) ThreadSubscriptions(threadID string) ([]store.Subscription, error) {
	return collect(t, "list subscriptions of thread "+threadID, scanSubscriptionRows, threadSubscriptionsSQL, threadID)
}

// threadSubscriptionsSQL reads a thread's subscriptions ($1).
const threadSubscriptionsSQL = `SELECT thread_id, call_id, tool_name, state, created FROM subscriptions WHERE thread_id = $1 ORDER BY created, call_id`

func scanSubscriptionRows(rows pgx.Rows) (store.Subscription, error) { return scanSubscription(rows) }

// Views

// PutView implements store.Views.
func (t *tx) PutView(v store.View) error {
	_, err := t.exec(`INSERT INTO views (thread_id, view_type, content, updated) VALUES ($1, $2, $3, $4)
		ON CONFLICT (thread_id, view_type) DO UPDATE SET content = excluded.content, updated = excluded.updated`,
		v.ThreadID, v.ViewType, bin(string(v.Content)), t.stamp(v.Updated))
	if err != nil {
		return fmt.Errorf("store view %q of thread %s: %w", v.ViewType, v.ThreadID, err)
	}
	return nil
}

// ThreadViews implements store.Views.
func (t *tx) ThreadViews(threadID string) ([]store.View, error) {
	return collect(t, "list views of thread "+threadID, func(rows pgx.Rows) (store.View, error) {
		v := store.View{ThreadID: threadID}
		var content []byte
		err := rows.Scan(&v.ViewType, &content, &v.Updated)
		v.Content, v.Updated = json.RawMessage(content), utc(v.Updated)
		return v, err
	}, `SELECT view_type, content, updated FROM views WHERE thread_id = $1 ORDER BY view_type`, threadID)
}

// Timers

// PutTimer implements store.Timers.
func (t *tx) PutTimer(tm store.Timer) error {
	_, err := t.exec(`INSERT INTO timers (id, thread_id, kind, payload, due, created) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id, kind = excluded.kind, payload = excluded.payload, due = excluded.due,
		claim_owner = '', claim_until = NULL`,
		tm.ID, tm.ThreadID, tm.Kind, binOrNull(tm.Payload), tm.Due, t.stamp(tm.Created))
	if err != nil {
		return fmt.Errorf("store timer %s of thread %s: %w", tm.ID, tm.ThreadID, err)
	}
	return nil
}

// DeleteTimer implements store.Timers.
func (t *tx) DeleteTimer(id string) error {
	if _, err := t.exec(`DELETE FROM timers WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete timer %s: %w", id, err)
	}
	return nil
}

// DueTimers implements store.Timers.
func (t *tx) DueTimers(now time.Time) ([]store.Timer, error) {
	return collect(t, "list due timers", scanTimerRows, `SELECT id, thread_id, kind, payload, due, created FROM timers WHERE due <= $1 ORDER BY due, id`, now)
}

// NextTimer implements store.Timers.
func (t *tx) NextTimer() (time.Time, bool, error) {
	var d *time.Time
	if err := t.queryRow(`SELECT MIN(due) FROM timers`).Scan(&d); err != nil {
		return time.Time{}, false, fmt.Errorf("read next timer: %w", err)
	}
	return utcPtr(d), d != nil, nil
}

// Toolset cache

// PutToolset implements store.ToolsetCache.
func (t *tx) PutToolset(c store.CachedToolset) error {
	_, err := t.exec(`INSERT INTO toolset_cache (root_id, base_url, manifest, fetched) VALUES ($1, $2, $3, $4)
		ON CONFLICT (root_id, base_url) DO UPDATE SET manifest = excluded.manifest, fetched = excluded.fetched`,
		c.RootID, c.BaseURL, bin(string(c.Manifest)), t.stamp(c.Fetched))
	if err != nil {
		return fmt.Errorf("cache toolset of %s for session %s: %w", c.BaseURL, c.RootID, err)
	}
	return nil
}

// SessionToolsets implements store.ToolsetCache.
func (t *tx) SessionToolsets(rootID string) ([]store.CachedToolset, error) {
	return collect(t, "read cached toolsets of session "+rootID, func(rows pgx.Rows) (store.CachedToolset, error) {
		c := store.CachedToolset{RootID: rootID}
		var manifest []byte
		err := rows.Scan(&c.BaseURL, &manifest, &c.Fetched)
		c.Manifest, c.Fetched = json.RawMessage(manifest), utc(c.Fetched)
		return c, err
	}, `SELECT base_url, manifest, fetched FROM toolset_cache WHERE root_id = $1 ORDER BY base_url`, rootID)
}

// LatestToolset implements store.ToolsetCache.
func (t *tx) LatestToolset(baseURL string) (store.CachedToolset, error) {
	c := store.CachedToolset{BaseURL: baseURL}
	var manifest []byte
	err := t.queryRow(`SELECT root_id, manifest, fetched FROM toolset_cache WHERE base_url = $1 ORDER BY fetched DESC LIMIT 1`, baseURL).
		Scan(&c.RootID, &manifest, &c.Fetched)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, backend.NotFound("cached toolset", baseURL)
	}
	if err != nil {
		return c, fmt.Errorf("read latest cached toolset of %s: %w", baseURL, err)
	}
	c.Manifest, c.Fetched = json.RawMessage(manifest), utc(c.Fetched)
	return c, nil
}

// TrustToolset implements store.ToolsetTrust.
func (t *tx) TrustToolset(rootID, baseURL, sha256 string) (string, error) {
	if _, err := t.exec(`INSERT INTO toolset_trust (root_id, base_url, sha256) VALUES ($1, $2, $3) ON CONFLICT (root_id, base_url) DO NOTHING`,
		rootID, baseURL, sha256); err != nil {
		return "", fmt.Errorf("record the trusted toolset digest of %s for session %s: %w", baseURL, rootID, err)
	}
	var trusted string
	if err := t.queryRow(`SELECT sha256 FROM toolset_trust WHERE root_id = $1 AND base_url = $2`, rootID, baseURL).Scan(&trusted); err != nil {
		return "", fmt.Errorf("read the trusted toolset digest of %s for session %s: %w", baseURL, rootID, err)
	}
	return trusted, nil
}

// Choices

// PutChoice implements store.Choices.
func (t *tx) PutChoice(c store.Choice) error {
	choices, err := backend.EncodeChoices(c.Choices)
	if err != nil {
		return fmt.Errorf("store user choice %s of thread %s: %w", c.CallID, c.ThreadID, err)
	}
	fields, err := backend.EncodeInputFields(c.Fields)
	if err != nil {
		return fmt.Errorf("store user input %s of thread %s: %w", c.CallID, c.ThreadID, err)
	}
	_, err = t.exec(`INSERT INTO choices (thread_id, call_id, tool_name, prompt, choices, default_index, response_url, created, fields) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET tool_name = excluded.tool_name, prompt = excluded.prompt, choices = excluded.choices,
		default_index = excluded.default_index, response_url = excluded.response_url, created = excluded.created, fields = excluded.fields`,
		c.ThreadID, c.CallID, c.ToolName, bin(c.Prompt), choices, c.Default, bin(c.ResponseURL), t.stamp(c.Created), fields)
	if err != nil {
		return fmt.Errorf("store user choice %s of thread %s: %w", c.CallID, c.ThreadID, err)
	}
	return nil
}

const choiceCols = `thread_id, call_id, tool_name, prompt, choices, default_index, response_url, created, fields`

func scanChoice(sc interface{ Scan(...any) error }) (store.Choice, error) {
	var c store.Choice
	var prompt, choices, url, fields []byte
	if err := sc.Scan(&c.ThreadID, &c.CallID, &c.ToolName, &prompt, &choices, &c.Default, &url, &c.Created, &fields); err != nil {
		return c, err
	}
	c.Prompt, c.ResponseURL, c.Created = string(prompt), string(url), utc(c.Created)
	var err error
	if c.Choices, err = backend.DecodeChoices(choices); err != nil {
		return c, fmt.Errorf("user choice %s: %w", c.CallID, err)
	}
	if fields != nil {
		if c.Fields, err = backend.DecodeInputFields(fields); err != nil {
			return c, fmt.Errorf("user input %s: %w", c.CallID, err)
		}
	}
	return c, nil
}

// TakeChoice implements store.Choices.
func (t *tx) TakeChoice(threadID, callID string) (store.Choice, error) {
	c, err := scanChoice(t.queryRow(`DELETE FROM choices WHERE thread_id = $1 AND call_id = $2 RETURNING `+choiceCols, threadID, callID))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, backend.NotFound("user choice", threadID, callID)
	}
	if err != nil {
		return c, fmt.Errorf("take user choice %s of thread %s: %w", callID, threadID, err)
	}
	return c, nil
}

// ThreadChoices implements store.Choices.
func (t *tx) ThreadChoices(threadID string) ([]store.Choice, error) {
	return collect(t, "list user choices of thread "+threadID, scanChoiceRows, threadChoicesSQL, threadID)
}

// threadChoicesSQL reads a thread's open user choices ($1).
const threadChoicesSQL = `SELECT ` + choiceCols + ` FROM choices WHERE thread_id = $1 ORDER BY created, call_id`

func scanChoiceRows(rows pgx.Rows) (store.Choice, error) { return scanChoice(rows) }
