package sqlite

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// tx implements store.Tx on one database/sql transaction.
type tx struct {
	tx  *stmtTx
	now time.Time
	// choices is false while the choices table is known to be empty, so
	// that TakeChoice, which every tool result runs, costs no query.
	choices *atomic.Bool
}

var _ store.Tx = (*tx)(nil)

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func nullable(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// stamp returns v, or the transaction's time when v is zero.
func (t *tx) stamp(v time.Time) time.Time { return backend.Stamp(v, t.now) }

// collect runs a query and reads each of its rows with scan; a failure
// says what was being read.
func collect[T any](t *tx, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := t.tx.Query(query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// scanString reads a row of one text column.
func scanString(sc scanner) (string, error) {
	var v string
	err := sc.Scan(&v)
	return v, err
}

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
	var originArgs any
	if len(th.OriginArgs) > 0 {
		originArgs = string(th.OriginArgs)
	}
	if t.tx.rows != nil {
		t.tx.overlay.forget(th.ID)
	}
	_, err = t.tx.Exec(`INSERT INTO threads (id, parent_id, root_id, status, created, origin_call_id, origin_tool, origin_args, inherit_seq, user_id, title, first_message, search_text, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		th.ID, parent, th.RootID, string(th.Status), nanos(th.Created), th.OriginCallID, th.OriginTool, originArgs, th.InheritSeq, th.UserID,
		th.Title, th.FirstMessage, backend.SearchText(th.Title, th.FirstMessage), th.Archived)
	if err != nil {
		return fmt.Errorf("create thread %s: %w", th.ID, err)
	}
	return nil
}

// threadCols are the columns scanThread reads, created the fifth and id
// the first (the page queries order by their numbers).
const threadCols = `id, COALESCE(parent_id, ''), root_id, status, created, origin_call_id, origin_tool, COALESCE(origin_args, ''), inherit_seq, user_id, title, COALESCE(first_message, ''), archived`

func scanThread(sc scanner) (store.Thread, error) {
	var th store.Thread
	var created int64
	var args string
	err := sc.Scan(&th.ID, &th.ParentID, &th.RootID, &th.Status, &created, &th.OriginCallID, &th.OriginTool, &args, &th.InheritSeq, &th.UserID,
		&th.Title, &th.FirstMessage, &th.Archived)
	th.Created = fromNanos(created)
	if args != "" {
		th.OriginArgs = json.RawMessage(args)
	}
	return th, err
}

// Thread implements store.Threads.
func (t *tx) Thread(id string) (store.Thread, error) {
	if t.tx.rows != nil {
		if th, ok := t.tx.overlay.thread(t.tx.rows, id); ok {
			return th, nil
		}
	}
	th, err := scanThread(t.tx.QueryRow(`SELECT `+threadCols+` FROM threads WHERE id = ?`, id))
	if err == nil && t.tx.rows != nil {
		t.tx.overlay.setThread(id, th)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return th, backend.NotFound("thread", id)
	}
	if err != nil {
		return th, fmt.Errorf("read thread %s: %w", id, err)
	}
	return th, nil
}

// ListThreads implements store.Threads.
func (t *tx) ListThreads() ([]store.Thread, error) {
	return collect(t, "list threads", scanThread, `SELECT `+threadCols+` FROM threads ORDER BY created, id`)
}

// SetThreadStatus implements store.Threads.
func (t *tx) SetThreadStatus(id string, s store.ThreadStatus) error {
	if t.tx.rows != nil {
		t.tx.overlay.forget(id)
	}
	res, err := t.tx.Exec(`UPDATE threads SET status = ? WHERE id = ?`, string(s), id)
	if err != nil {
		return fmt.Errorf("set status of thread %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return backend.NotFound("thread", id)
	}
	return nil
}

// Messages

// textOrNull is b as a nullable TEXT parameter: NULL when nil.
func textOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// LastSeq implements store.Messages.
func (t *tx) LastSeq(threadID string) (int64, error) {
	if t.tx.rows != nil {
		if n, ok := t.tx.overlay.last(t.tx.rows, threadID); ok {
			return n, nil
		}
	}
	var last, inherit int64
	err := t.tx.QueryRow(`SELECT COALESCE((SELECT MAX(seq) FROM messages WHERE thread_id = ?), 0), COALESCE((SELECT inherit_seq FROM threads WHERE id = ?), 0)`,
		threadID, threadID).Scan(&last, &inherit)
	if err != nil {
		return 0, fmt.Errorf("read the last seq of thread %s: %w", threadID, err)
	}
	if t.tx.rows != nil {
		t.tx.overlay.setLast(threadID, max(last, inherit))
	}
	return max(last, inherit), nil
}

// AppendMessages implements store.Messages.
func (t *tx) AppendMessages(threadID string, msgs []store.Message) ([]store.Message, error) {
	return backend.AppendMessages(t, threadID, msgs, t.now)
}

// InsertMessages implements backend.MessageWriter, with one statement.
func (t *tx) InsertMessages(threadID string, msgs []store.Message) error {
	args := make([]any, 0, 8*len(msgs))
	for _, m := range msgs {
		calls, results, err := backend.EncodeMessage(m)
		if err != nil {
			return err
		}
		usage, err := backend.EncodeUsage(m.Usage)
		if err != nil {
			return err
		}
		args = append(args, threadID, m.Seq, string(m.Role), m.Text, textOrNull(calls), textOrNull(results), nanos(m.Created), textOrNull(usage))
	}
	if _, err := t.tx.Exec(insertMessagesSQL(len(msgs)), args...); err != nil {
		if t.tx.rows != nil {
			t.tx.overlay.forget(threadID)
		}
		return err
	}
	if t.tx.rows != nil {
		t.tx.overlay.setLast(threadID, msgs[len(msgs)-1].Seq)
	}
	return nil
}

// insertMessagesSQL returns the statement inserting n messages; the texts
// for small n are built once, so they stay prepared.
func insertMessagesSQL(n int) string {
	if n <= len(insertMessagesTexts) {
		return insertMessagesTexts[n-1]
	}
	return buildInsertMessages(n)
}

var insertMessagesTexts = func() []string {
	texts := make([]string, 8)
	for i := range texts {
		texts[i] = buildInsertMessages(i + 1)
	}
	return texts
}()

func buildInsertMessages(n int) string {
	return `INSERT INTO messages (thread_id, seq, role, text, tool_calls, tool_results, created, usage) VALUES ` +
		strings.TrimSuffix(strings.Repeat(`(?, ?, ?, ?, ?, ?, ?, ?), `, n), ", ")
}

// History implements store.Messages with the shared history walk.
func (t *tx) History(threadID string) ([]store.Message, error) {
	return backend.History(t, threadID)
}

// HistorySince implements store.Messages with the shared history walk.
func (t *tx) HistorySince(threadID string, after int64) ([]store.Message, error) {
	if t.tx.rows != nil {
		// Nothing, own or inherited, comes after the thread's last seq:
		// a caller that has read up to it needs no query.
		if last, ok := t.tx.overlay.last(t.tx.rows, threadID); ok && after >= last {
			return nil, nil
		}
	}
	return backend.HistorySince(t, threadID, after)
}

// OwnMessages implements backend.HistoryReader: the thread's own messages
// with after < seq <= upTo (no upper bound when upTo is negative), through
// the (thread_id, seq) key.
func (t *tx) OwnMessages(threadID string, after, upTo int64) ([]store.Message, error) {
	if upTo < 0 {
		upTo = 1<<63 - 1
	}
	return collect(t, "read history of thread "+threadID, func(sc scanner) (store.Message, error) {
		m := store.Message{ThreadID: threadID}
		var calls, results, usage []byte
		var created int64
		if err := sc.Scan(&m.Seq, &m.Role, &m.Text, &calls, &results, &created, &usage); err != nil {
			return m, err
		}
		m.Created = fromNanos(created)
		if err := backend.DecodeMessage(&m, calls, results); err != nil {
			return m, fmt.Errorf("message %d: %w", m.Seq, err)
		}
		var err error
		if m.Usage, err = backend.DecodeUsage(usage); err != nil {
			return m, fmt.Errorf("message %d: %w", m.Seq, err)
		}
		return m, nil
	}, `SELECT seq, role, text, tool_calls, tool_results, created, usage FROM messages WHERE thread_id = ? AND seq > ? AND seq <= ? ORDER BY seq`, threadID, after, upTo)
}

// Inbox

// MarkKeySeen implements store.Inbox.
func (t *tx) MarkKeySeen(threadID, key string) (bool, error) {
	if key == "" {
		return false, errors.New("mark key seen: empty key")
	}
	res, err := t.tx.Exec(`INSERT INTO seen_keys (key, thread_id, created) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`,
		key, threadID, nanos(t.now))
	if err != nil {
		return false, fmt.Errorf("mark key seen for thread %s: %w", threadID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SeenKey implements store.Inbox.
func (t *tx) SeenKey(key string) (bool, error) {
	var one int
	err := t.tx.QueryRow(`SELECT 1 FROM seen_keys WHERE key = ?`, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up dedup key: %w", err)
	}
	return true, nil
}

// Enqueue implements store.Inbox.
func (t *tx) Enqueue(item store.InboxItem) (bool, error) {
	return backend.Enqueue(t, item, t.now)
}

// InsertInboxItem implements backend.Queue.
func (t *tx) InsertInboxItem(item store.InboxItem) (bool, error) {
	res, err := t.tx.Exec(`INSERT INTO inbox (thread_id, kind, payload, dedup_key, created) VALUES (?, ?, ?, ?, ?) ON CONFLICT (dedup_key) DO NOTHING`,
		item.ThreadID, string(item.Kind), string(item.Payload), item.DedupKey, nanos(item.Created))
	if err != nil {
		return false, fmt.Errorf("enqueue %s for thread %s: %w", item.Kind, item.ThreadID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("enqueue %s for thread %s: %w", item.Kind, item.ThreadID, err)
	}
	return n == 1, nil
}

// Queued implements store.Inbox.
func (t *tx) Queued(threadID string) ([]store.InboxItem, error) {
	return collect(t, "read inbox of thread "+threadID, func(sc scanner) (store.InboxItem, error) {
		it := store.InboxItem{ThreadID: threadID}
		var payload string
		var created int64
		err := sc.Scan(&it.ID, &it.Kind, &payload, &it.DedupKey, &created)
		it.Payload, it.Created = json.RawMessage(payload), fromNanos(created)
		return it, err
	}, `SELECT id, kind, payload, dedup_key, created FROM inbox WHERE thread_id = ? ORDER BY id`, threadID)
}

// QueuedThreads implements store.Inbox.
func (t *tx) QueuedThreads() ([]string, error) {
	return collect(t, "list threads with queued messages", scanString, `SELECT thread_id FROM inbox GROUP BY thread_id ORDER BY MIN(id)`)
}

// Consume implements store.Inbox.
func (t *tx) Consume(ids []int64) error {
	for _, id := range ids {
		res, err := t.tx.Exec(`DELETE FROM inbox WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("consume inbox item %d: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("consume inbox item %d: %w", id, store.ErrConsumed)
		}
	}
	return nil
}

// Calls

const callCols = `thread_id, call_id, tool_name, arguments, toolset, endpoint, turn_seq, state, COALESCE(deadline, 0), created, updated`

func scanCall(sc scanner) (store.Call, error) {
	var c store.Call
	var args string
	var deadline, created, updated int64
	err := sc.Scan(&c.ThreadID, &c.CallID, &c.ToolName, &args, &c.Toolset, &c.Endpoint, &c.TurnSeq, &c.State, &deadline, &created, &updated)
	c.Arguments = json.RawMessage(args)
	c.Deadline, c.Created, c.Updated = fromNanos(deadline), fromNanos(created), fromNanos(updated)
	return c, err
}

// PutCalls implements store.Calls.
func (t *tx) PutCalls(calls []store.Call) error {
	for _, c := range calls {
		c = backend.NewCall(c, t.now)
		if _, err := t.tx.Exec(`INSERT INTO calls (thread_id, call_id, tool_name, arguments, toolset, endpoint, turn_seq, state, deadline, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ThreadID, c.CallID, c.ToolName, string(c.Arguments), c.Toolset, c.Endpoint, c.TurnSeq, string(c.State),
			nullable(c.Deadline), nanos(c.Created), nanos(c.Updated)); err != nil {
			return fmt.Errorf("record call %s of thread %s: %w", c.CallID, c.ThreadID, err)
		}
		if t.tx.rows != nil {
			// The row as Call would read it back.
			c.Deadline, c.Created, c.Updated = fromNanos(nanos(c.Deadline)), fromNanos(nanos(c.Created)), fromNanos(nanos(c.Updated))
			t.tx.overlay.setCall(c)
			t.tx.overlay.notePending(t.tx.rows, c.ThreadID, c.CallID, c.State.Pending())
		}
	}
	return nil
}

// Call implements store.Calls.
func (t *tx) Call(threadID, callID string) (store.Call, error) {
	if t.tx.rows != nil {
		if c, ok := t.tx.overlay.call(t.tx.rows, callKey{threadID, callID}); ok {
			return c, nil
		}
	}
	c, err := scanCall(t.tx.QueryRow(`SELECT `+callCols+` FROM calls WHERE thread_id = ? AND call_id = ?`, threadID, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return c, backend.NotFound("call", threadID, callID)
	}
	if err != nil {
		return c, fmt.Errorf("read call %s of thread %s: %w", callID, threadID, err)
	}
	if t.tx.rows != nil {
		t.tx.overlay.setCall(c)
	}
	return c, nil
}

// SetCallState implements store.Calls.
func (t *tx) SetCallState(threadID, callID string, to store.CallState, from ...store.CallState) (bool, error) {
	q := setCallStateSQL[min(len(from), len(setCallStateSQL)-1)]
	if len(from) >= len(setCallStateSQL) {
		q = setCallStateSQL[0] + ` AND state IN (?` + strings.Repeat(", ?", len(from)-1) + `)`
	}
	args := make([]any, 4, 4+len(from))
	args[0], args[1], args[2], args[3] = stateArg(to), nanos(t.now), threadID, callID
	for _, f := range from {
		args = append(args, stateArg(f))
	}
	res, err := t.tx.Exec(q, args...)
	if err != nil {
		return false, fmt.Errorf("set state of call %s of thread %s to %s: %w", callID, threadID, to, err)
	}
	n, err := res.RowsAffected()
	if o, rows := &t.tx.overlay, t.tx.rows; rows != nil {
		k := callKey{threadID, callID}
		switch {
		case err != nil:
			o.forgetCall(k) // the statement ran; what it changed is unknown
		case n == 1:
			o.moveCall(rows, k, to, fromNanos(nanos(t.now)))
			o.notePending(rows, threadID, callID, to.Pending())
		default:
			// Nothing moved: right if the cached state is not one of from.
			if c, ok := o.call(rows, k); ok && (len(from) == 0 || slices.Contains(from, c.State)) {
				o.forgetCall(k) // the cache disagrees with the database
			}
		}
	}
	return n == 1, err
}

// stateArgs holds each call state as a statement argument, boxed once.
var stateArgs = map[store.CallState]any{
	store.CallNew: string(store.CallNew), store.CallDispatched: string(store.CallDispatched),
	store.CallDone: string(store.CallDone), store.CallCancelled: string(store.CallCancelled),
}

// stateArg returns s as a statement argument.
func stateArg(s store.CallState) any {
	if a, ok := stateArgs[s]; ok {
		return a
	}
	return string(s)
}

// setCallStateSQL holds SetCallState's statement for no, one, two and
// three states to move from, built once.
var setCallStateSQL = [...]string{
	`UPDATE calls SET state = ?, updated = ? WHERE thread_id = ? AND call_id = ?`,
	`UPDATE calls SET state = ?, updated = ? WHERE thread_id = ? AND call_id = ? AND state IN (?)`,
	`UPDATE calls SET state = ?, updated = ? WHERE thread_id = ? AND call_id = ? AND state IN (?, ?)`,
	`UPDATE calls SET state = ?, updated = ? WHERE thread_id = ? AND call_id = ? AND state IN (?, ?, ?)`,
}

// CallsInState implements store.Calls.
func (t *tx) CallsInState(s store.CallState) ([]store.Call, error) {
	q := `SELECT ` + callCols + ` FROM calls WHERE state = ? ORDER BY created, call_id`
	if s.Pending() {
		q = callsInPendingStateSQL
	}
	return collect(t, "list calls in state "+string(s), scanCall, q, string(s))
}

// ThreadCalls implements store.Calls.
func (t *tx) ThreadCalls(threadID string) ([]store.Call, error) {
	return collect(t, "list calls of thread "+threadID, scanCall,
		`SELECT `+callCols+` FROM calls WHERE thread_id = ? ORDER BY created, call_id`, threadID)
}

// PendingCalls implements store.Calls.
func (t *tx) PendingCalls(threadID string) ([]store.Call, error) {
	// Every slice runs this, mostly to find no call: sorting in Go
	// spares SQLite the temporary b-tree (a pager opened and closed) that
	// an ORDER BY here costs on each run.
	// On the writer, the row cache usually knows the thread's pending
	// calls and their rows, and no statement runs at all.
	if calls, ok := t.cachedPendingCalls(threadID); ok {
		sortCalls(calls)
		return calls, nil
	}
	calls, err := collect(t, "list pending calls of thread "+threadID, scanCall, pendingCallsSQL, threadID)
	if err != nil {
		return nil, err
	}
	if t.tx.rows != nil {
		ids := make([]string, len(calls))
		for i, c := range calls {
			ids[i] = c.CallID
			t.tx.overlay.setCall(c)
		}
		t.tx.overlay.setPending(threadID, ids)
	}
	sortCalls(calls)
	return calls, nil
}

// OldestPendingCalls implements store.Calls.
func (t *tx) OldestPendingCalls(userID string, after store.CallCursor, limit int) ([]store.Call, error) {
	if limit < 1 {
		return nil, nil
	}
	args := []any{nanos(after.Created), after.ThreadID, after.CallID, limit}
	q := oldestPendingCallsSQL
	if userID != "" {
		q, args = oldestUserPendingCallsSQL, append(args, userID)
	}
	return collect(t, "list the oldest pending calls", scanCall, q, args...)
}

// cachedPendingCalls returns a thread's pending calls from the writer's
// row cache, if it knows them all.
func (t *tx) cachedPendingCalls(threadID string) ([]store.Call, bool) {
	if t.tx.rows == nil {
		return nil, false
	}
	ids, ok := t.tx.overlay.pendingIDs(t.tx.rows, threadID)
	if !ok {
		return nil, false
	}
	var calls []store.Call
	for _, id := range ids {
		c, ok := t.tx.overlay.call(t.tx.rows, callKey{threadID, id})
		if !ok {
			return nil, false // a call too big to keep: ask the database
		}
		calls = append(calls, c)
	}
	return calls, true
}

// sortCalls orders calls as they were made: by creation, then id.
func sortCalls(calls []store.Call) {
	slices.SortFunc(calls, func(a, b store.Call) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.CallID, b.CallID))
	})
}

// DueCalls implements store.Calls.
func (t *tx) DueCalls(now time.Time) ([]store.Call, error) {
	return collect(t, "list calls past their deadline", scanCall,
		dueCallsSQL, now.UnixNano())
}

// NextDeadline implements store.Calls.
func (t *tx) NextDeadline() (time.Time, bool, error) {
	var d sql.NullInt64
	if err := t.tx.QueryRow(nextDeadlineSQL).Scan(&d); err != nil {
		return time.Time{}, false, fmt.Errorf("read next call deadline: %w", err)
	}
	if !d.Valid {
		return time.Time{}, false, nil
	}
	return fromNanos(d.Int64), true, nil
}

// Subscriptions

// PutSubscription implements store.Subscriptions.
func (t *tx) PutSubscription(s store.Subscription) error {
	_, err := t.tx.Exec(`INSERT INTO subscriptions (thread_id, call_id, tool_name, state, created) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET tool_name = excluded.tool_name, state = excluded.state`,
		s.ThreadID, s.CallID, s.ToolName, string(s.State), nanos(t.stamp(s.Created)))
	if err != nil {
		return fmt.Errorf("record subscription %s of thread %s: %w", s.CallID, s.ThreadID, err)
	}
	return nil
}

func scanSubscription(sc scanner) (store.Subscription, error) {
	var s store.Subscription
	var created int64
	err := sc.Scan(&s.ThreadID, &s.CallID, &s.ToolName, &s.State, &created)
	s.Created = fromNanos(created)
	return s, err
}

// Subscription implements store.Subscriptions.
func (t *tx) Subscription(threadID, callID string) (store.Subscription, error) {
	s, err := scanSubscription(t.tx.QueryRow(`SELECT thread_id, call_id, tool_name, state, created FROM subscriptions WHERE thread_id = ? AND call_id = ?`, threadID, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return s, backend.NotFound("subscription", threadID, callID)
	}
	if err != nil {
		return s, fmt.Errorf("read subscription %s of thread %s: %w", callID, threadID, err)
	}
	return s, nil
}

// ThreadSubscriptions implements store.Subscriptions.
func (t *tx) ThreadSubscriptions(threadID string) ([]store.Subscription, error) {
	return collect(t, "list subscriptions of thread "+threadID, scanSubscription,
		`SELECT thread_id, call_id, tool_name, state, created FROM subscriptions WHERE thread_id = ? ORDER BY created, call_id`, threadID)
}

// Views

// PutView implements store.Views.
func (t *tx) PutView(v store.View) error {
	_, err := t.tx.Exec(`INSERT INTO views (thread_id, view_type, content, updated) VALUES (?, ?, ?, ?)
		ON CONFLICT (thread_id, view_type) DO UPDATE SET content = excluded.content, updated = excluded.updated`,
		v.ThreadID, v.ViewType, string(v.Content), nanos(t.stamp(v.Updated)))
	if err != nil {
		return fmt.Errorf("store view %q of thread %s: %w", v.ViewType, v.ThreadID, err)
	}
	return nil
}

// ThreadViews implements store.Views.
func (t *tx) ThreadViews(threadID string) ([]store.View, error) {
	return collect(t, "list views of thread "+threadID, func(sc scanner) (store.View, error) {
		v := store.View{ThreadID: threadID}
		var content string
		var updated int64
		err := sc.Scan(&v.ViewType, &content, &updated)
		v.Content, v.Updated = json.RawMessage(content), fromNanos(updated)
		return v, err
	}, `SELECT view_type, content, updated FROM views WHERE thread_id = ? ORDER BY view_type`, threadID)
}

// Timers

// PutTimer implements store.Timers.
func (t *tx) PutTimer(tm store.Timer) error {
	var payload any
	if len(tm.Payload) > 0 {
		payload = string(tm.Payload)
	}
	_, err := t.tx.Exec(`INSERT INTO timers (id, thread_id, kind, payload, due, created) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id, kind = excluded.kind, payload = excluded.payload, due = excluded.due,
		claim_owner = '', claim_until = 0`,
		tm.ID, tm.ThreadID, tm.Kind, payload, nanos(tm.Due), nanos(t.stamp(tm.Created)))
	if err != nil {
		return fmt.Errorf("store timer %s of thread %s: %w", tm.ID, tm.ThreadID, err)
	}
	return nil
}

// DeleteTimer implements store.Timers.
func (t *tx) DeleteTimer(id string) error {
	if _, err := t.tx.Exec(`DELETE FROM timers WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete timer %s: %w", id, err)
	}
	return nil
}

const timerCols = `id, thread_id, kind, COALESCE(payload, ''), due, created`

func scanTimer(sc scanner) (store.Timer, error) {
	var tm store.Timer
	var payload string
	var due, created int64
	err := sc.Scan(&tm.ID, &tm.ThreadID, &tm.Kind, &payload, &due, &created)
	if payload != "" {
		tm.Payload = json.RawMessage(payload)
	}
	tm.Due, tm.Created = fromNanos(due), fromNanos(created)
	return tm, err
}

// DueTimers implements store.Timers.
func (t *tx) DueTimers(now time.Time) ([]store.Timer, error) {
	return collect(t, "list due timers", scanTimer, `SELECT `+timerCols+` FROM timers WHERE due <= ? ORDER BY due, id`, now.UnixNano())
}

// NextTimer implements store.Timers.
func (t *tx) NextTimer() (time.Time, bool, error) {
	var d sql.NullInt64
	if err := t.tx.QueryRow(`SELECT MIN(due) FROM timers`).Scan(&d); err != nil {
		return time.Time{}, false, fmt.Errorf("read next timer: %w", err)
	}
	if !d.Valid {
		return time.Time{}, false, nil
	}
	return fromNanos(d.Int64), true, nil
}

// Toolset cache

// PutToolset implements store.ToolsetCache.
func (t *tx) PutToolset(c store.CachedToolset) error {
	_, err := t.tx.Exec(`INSERT INTO toolset_cache (root_id, base_url, manifest, fetched) VALUES (?, ?, ?, ?)
		ON CONFLICT (root_id, base_url) DO UPDATE SET manifest = excluded.manifest, fetched = excluded.fetched`,
		c.RootID, c.BaseURL, string(c.Manifest), nanos(t.stamp(c.Fetched)))
	if err != nil {
		return fmt.Errorf("cache toolset of %s for session %s: %w", c.BaseURL, c.RootID, err)
	}
	return nil
}

// SessionToolsets implements store.ToolsetCache.
func (t *tx) SessionToolsets(rootID string) ([]store.CachedToolset, error) {
	return collect(t, "read cached toolsets of session "+rootID, func(sc scanner) (store.CachedToolset, error) {
		c := store.CachedToolset{RootID: rootID}
		var manifest string
		var fetched int64
		err := sc.Scan(&c.BaseURL, &manifest, &fetched)
		c.Manifest, c.Fetched = json.RawMessage(manifest), fromNanos(fetched)
		return c, err
	}, `SELECT base_url, manifest, fetched FROM toolset_cache WHERE root_id = ? ORDER BY base_url`, rootID)
}

// LatestToolset implements store.ToolsetCache.
func (t *tx) LatestToolset(baseURL string) (store.CachedToolset, error) {
	c := store.CachedToolset{BaseURL: baseURL}
	var manifest string
	var fetched int64
	err := t.tx.QueryRow(`SELECT root_id, manifest, fetched FROM toolset_cache WHERE base_url = ? ORDER BY fetched DESC LIMIT 1`, baseURL).
		Scan(&c.RootID, &manifest, &fetched)
	if errors.Is(err, sql.ErrNoRows) {
		return c, backend.NotFound("cached toolset", baseURL)
	}
	if err != nil {
		return c, fmt.Errorf("read latest cached toolset of %s: %w", baseURL, err)
	}
	c.Manifest, c.Fetched = json.RawMessage(manifest), fromNanos(fetched)
	return c, nil
}

// TrustToolset implements store.ToolsetTrust.
func (t *tx) TrustToolset(rootID, baseURL, sha256 string) (string, error) {
	if _, err := t.tx.Exec(`INSERT INTO toolset_trust (root_id, base_url, sha256) VALUES (?, ?, ?) ON CONFLICT (root_id, base_url) DO NOTHING`,
		rootID, baseURL, sha256); err != nil {
		return "", fmt.Errorf("record the trusted toolset digest of %s for session %s: %w", baseURL, rootID, err)
	}
	var trusted string
	if err := t.tx.QueryRow(`SELECT sha256 FROM toolset_trust WHERE root_id = ? AND base_url = ?`, rootID, baseURL).Scan(&trusted); err != nil {
		return "", fmt.Errorf("read the trusted toolset digest of %s for session %s: %w", baseURL, rootID, err)
	}
	return trusted, nil
}

// Choices

// PutChoice implements store.Choices.
func (t *tx) PutChoice(c store.Choice) error {
	t.choices.Store(true) // before the insert: a rollback leaves it true, which is safe
	choices, err := backend.EncodeChoices(c.Choices)
	if err != nil {
		return fmt.Errorf("store user choice %s of thread %s: %w", c.CallID, c.ThreadID, err)
	}
	fields, err := backend.EncodeInputFields(c.Fields)
	if err != nil {
		return fmt.Errorf("store user input %s of thread %s: %w", c.CallID, c.ThreadID, err)
	}
	var fieldsCol any // NULL for a choice
	if fields != nil {
		fieldsCol = string(fields)
	}
	_, err = t.tx.Exec(`INSERT INTO choices (thread_id, call_id, tool_name, prompt, choices, default_index, response_url, created, fields) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET tool_name = excluded.tool_name, prompt = excluded.prompt, choices = excluded.choices,
		default_index = excluded.default_index, response_url = excluded.response_url, created = excluded.created, fields = excluded.fields`,
		c.ThreadID, c.CallID, c.ToolName, c.Prompt, string(choices), c.Default, c.ResponseURL, nanos(t.stamp(c.Created)), fieldsCol)
	if err != nil {
		return fmt.Errorf("store user choice %s of thread %s: %w", c.CallID, c.ThreadID, err)
	}
	return nil
}

const choiceCols = `thread_id, call_id, tool_name, prompt, choices, default_index, response_url, created, fields`

func scanChoice(sc scanner) (store.Choice, error) {
	var c store.Choice
	var choices string
	var fields sql.NullString
	var created int64
	if err := sc.Scan(&c.ThreadID, &c.CallID, &c.ToolName, &c.Prompt, &choices, &c.Default, &c.ResponseURL, &created, &fields); err != nil {
		return c, err
	}
	c.Created = fromNanos(created)
	var err error
	if c.Choices, err = backend.DecodeChoices([]byte(choices)); err != nil {
		return c, fmt.Errorf("user choice %s: %w", c.CallID, err)
	}
	if fields.Valid {
		if c.Fields, err = backend.DecodeInputFields([]byte(fields.String)); err != nil {
			return c, fmt.Errorf("user input %s: %w", c.CallID, err)
		}
	}
	return c, nil
}

// noChoice is TakeChoice's store.ErrNotFound when no choice waits at
// all: the error of backend.NotFound, formatted only when read, since
// every tool result asks and almost none finds one.
type noChoice struct{ threadID, callID string }

func (e *noChoice) Error() string {
	return backend.NotFound("user choice", e.threadID, e.callID).Error()
}

func (e *noChoice) Unwrap() error { return store.ErrNotFound }

// TakeChoice implements store.Choices.
func (t *tx) TakeChoice(threadID, callID string) (store.Choice, error) {
	if !t.choices.Load() {
		return store.Choice{}, &noChoice{threadID, callID}
	}
	// One statement: SQLite makes the deletion in the first step and
	// returns the deleted row.
	c, err := scanChoice(t.tx.QueryRow(`DELETE FROM choices WHERE thread_id = ? AND call_id = ? RETURNING `+choiceCols, threadID, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return c, backend.NotFound("user choice", threadID, callID)
	}
	if err != nil {
		return c, fmt.Errorf("take user choice %s of thread %s: %w", callID, threadID, err)
	}
	return c, nil
}

// ThreadChoices implements store.Choices.
func (t *tx) ThreadChoices(threadID string) ([]store.Choice, error) {
	return collect(t, "list user choices of thread "+threadID, scanChoice,
		`SELECT `+choiceCols+` FROM choices WHERE thread_id = ? ORDER BY created, call_id`, threadID)
}
