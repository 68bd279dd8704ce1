package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// Held subscription events and call status checks.

// HoldEvent implements store.HeldEvents.
func (t *tx) HoldEvent(e store.HeldEvent) error {
	if err := backend.CheckHeldEvent(e); err != nil {
		return err
	}
	if _, err := t.exec(`INSERT INTO held_events (thread_id, call_id, payload, created) VALUES ($1, $2, $3, $4)`,
		e.ThreadID, e.CallID, []byte(e.Payload), t.stamp(e.Created)); err != nil {
		return fmt.Errorf("hold subscription event of call %s of thread %s: %w", e.CallID, e.ThreadID, err)
	}
	return nil
}

// HeldEventStats implements store.HeldEvents.
func (t *tx) HeldEventStats(threadID, callID string) (store.HeldStats, error) {
	var s store.HeldStats
	err := t.queryRow(`SELECT
		(SELECT COUNT(*) FROM held_events WHERE thread_id = $1 AND call_id = $2),
		(SELECT COALESCE(SUM(octet_length(payload)), 0) FROM held_events WHERE thread_id = $1 AND call_id = $2),
		(SELECT COALESCE(SUM(octet_length(payload)), 0) FROM held_events)`,
		threadID, callID).Scan(&s.Count, &s.Bytes, &s.TotalBytes)
	if err != nil {
		return s, fmt.Errorf("size the held subscription events of call %s of thread %s: %w", callID, threadID, err)
	}
	return s, nil
}

// TakeHeldEvents implements store.HeldEvents.
func (t *tx) TakeHeldEvents(threadID, callID string) ([]store.HeldEvent, error) {
	return collect(t, fmt.Sprintf("take the held subscription events of call %s of thread %s", callID, threadID), func(rows pgx.Rows) (store.HeldEvent, error) {
		e := store.HeldEvent{ThreadID: threadID, CallID: callID}
		var payload []byte
		err := rows.Scan(&e.ID, &payload, &e.Created)
		e.Payload, e.Created = json.RawMessage(payload), utc(e.Created)
		return e, err
	}, `WITH taken AS (DELETE FROM held_events WHERE thread_id = $1 AND call_id = $2 RETURNING id, payload, created)
		SELECT id, payload, created FROM taken ORDER BY id`, threadID, callID)
}

// EndedHeldCalls implements store.HeldEvents.
func (t *tx) EndedHeldCalls() ([]store.Call, error) {
	return collect(t, "list ended calls with held subscription events", scanCallRows,
		`SELECT c.thread_id, c.call_id, c.tool_name, c.arguments, c.toolset, c.endpoint, c.turn_seq, c.state, c.deadline, c.created, c.updated
		FROM (SELECT DISTINCT thread_id, call_id FROM held_events) h
		JOIN calls c ON c.thread_id = h.thread_id AND c.call_id = h.call_id
		WHERE NOT `+pendingCalls+`
		ORDER BY c.created, c.call_id`)
}

// PutCallCheck implements store.CallChecks.
func (t *tx) PutCallCheck(c store.CallCheck) error {
	_, err := t.exec(`INSERT INTO call_checks (thread_id, call_id, due, failures) VALUES ($1, $2, $3, $4)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET due = excluded.due, failures = excluded.failures`,
		c.ThreadID, c.CallID, c.Due, c.Failures)
	if err != nil {
		return fmt.Errorf("schedule the status check of call %s in thread %s: %w", c.CallID, c.ThreadID, err)
	}
	return nil
}

// AddCallCheck implements store.CallChecks.
func (t *tx) AddCallCheck(c store.CallCheck) (bool, error) {
	tag, err := t.exec(`INSERT INTO call_checks (thread_id, call_id, due, failures) VALUES ($1, $2, $3, $4)
		ON CONFLICT (thread_id, call_id) DO NOTHING`,
		c.ThreadID, c.CallID, c.Due, c.Failures)
	if err != nil {
		return false, fmt.Errorf("schedule the status check of call %s in thread %s: %w", c.CallID, c.ThreadID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// AddCallChecks implements store.CallChecks: one statement for all.
func (t *tx) AddCallChecks(cs []store.CallCheck) (int, error) {
	if len(cs) == 0 {
		return 0, nil
	}
	threads := make([]string, len(cs))
	calls := make([]string, len(cs))
	dues := make([]time.Time, len(cs))
	failures := make([]int32, len(cs))
	for i, c := range cs {
		threads[i], calls[i], dues[i], failures[i] = c.ThreadID, c.CallID, c.Due, int32(c.Failures)
	}
	tag, err := t.exec(`INSERT INTO call_checks (thread_id, call_id, due, failures)
		SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[])
		ON CONFLICT (thread_id, call_id) DO NOTHING`, threads, calls, dues, failures)
	if err != nil {
		return 0, fmt.Errorf("schedule the status checks of %d calls: %w", len(cs), err)
	}
	return int(tag.RowsAffected()), nil
}

// UncheckedCalls implements store.CallChecks.
func (t *tx) UncheckedCalls(before time.Time, skip string, limit int) ([]store.Call, error) {
	return collect(t, "list dispatched calls without a status check", scanCallRows, uncheckedCallsSQL, before, skip, limit)
}

// uncheckedCallsSQL lists dispatched calls without a status check; its
// constant state is within the partial indexes' condition (pendingCalls).
const uncheckedCallsSQL = `SELECT c.thread_id, c.call_id, c.tool_name, c.arguments, c.toolset, c.endpoint, c.turn_seq, c.state, c.deadline, c.created, c.updated
	FROM calls c WHERE c.state = 'dispatched' AND c.updated <= $1 AND c.toolset != $2
	AND NOT EXISTS (SELECT 1 FROM call_checks k WHERE k.thread_id = c.thread_id AND k.call_id = c.call_id) LIMIT $3`

// DeleteCallCheck implements store.CallChecks.
func (t *tx) DeleteCallCheck(threadID, callID string) error {
	if _, err := t.exec(`DELETE FROM call_checks WHERE thread_id = $1 AND call_id = $2`, threadID, callID); err != nil {
		return fmt.Errorf("delete the status check of call %s in thread %s: %w", callID, threadID, err)
	}
	return nil
}

// DueCallChecks implements store.CallChecks.
func (t *tx) DueCallChecks(now time.Time, limit int) ([]store.CallCheck, error) {
	return collect(t, "list due call status checks", func(rows pgx.Rows) (store.CallCheck, error) {
		var c store.CallCheck
		err := rows.Scan(&c.ThreadID, &c.CallID, &c.Due, &c.Failures)
		c.Due = utc(c.Due)
		return c, err
	}, `SELECT thread_id, call_id, due, failures FROM call_checks WHERE due <= $1 ORDER BY due LIMIT $2`, now, limit)
}

// NextCallCheck implements store.CallChecks.
func (t *tx) NextCallCheck() (time.Time, bool, error) {
	var d *time.Time
	if err := t.queryRow(`SELECT MIN(due) FROM call_checks`).Scan(&d); err != nil {
		return time.Time{}, false, fmt.Errorf("read the next call status check: %w", err)
	}
	return utcPtr(d), d != nil, nil
}

// AdvanceCallChecks implements store.CallChecks.
func (t *tx) AdvanceCallChecks(due time.Time) (int64, error) {
	tag, err := t.exec(`UPDATE call_checks SET due = $1 WHERE due > $1`, due)
	if err != nil {
		return 0, fmt.Errorf("advance the call status checks: %w", err)
	}
	return tag.RowsAffected(), nil
}
