package sqlite

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// PutCallCheck implements store.CallChecks.
func (t *tx) PutCallCheck(c store.CallCheck) error {
	_, err := t.tx.Exec(`INSERT INTO call_checks (thread_id, call_id, due, failures) VALUES (?, ?, ?, ?)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET due = excluded.due, failures = excluded.failures`,
		c.ThreadID, c.CallID, max(nanos(c.Due), 1), c.Failures)
	if err != nil {
		return fmt.Errorf("schedule the status check of call %s in thread %s: %w", c.CallID, c.ThreadID, err)
	}
	return nil
}

// AddCallCheck implements store.CallChecks.
func (t *tx) AddCallCheck(c store.CallCheck) (bool, error) {
	res, err := t.tx.Exec(`INSERT INTO call_checks (thread_id, call_id, due, failures) VALUES (?, ?, ?, ?)
		ON CONFLICT (thread_id, call_id) DO NOTHING`,
		c.ThreadID, c.CallID, max(nanos(c.Due), 1), c.Failures)
	if err != nil {
		return false, fmt.Errorf("schedule the status check of call %s in thread %s: %w", c.CallID, c.ThreadID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// AddCallChecks implements store.CallChecks.
func (t *tx) AddCallChecks(cs []store.CallCheck) (int, error) {
	added := 0
	for _, c := range cs {
		ok, err := t.AddCallCheck(c)
		if err != nil {
			return added, err
		}
		if ok {
			added++
		}
	}
	return added, nil
}

// UncheckedCalls implements store.CallChecks.
func (t *tx) UncheckedCalls(before time.Time, skip string, limit int) ([]store.Call, error) {
	return collect(t, "list dispatched calls without a status check", scanCall,
		uncheckedCallsSQL, nanos(before), skip, limit)
}

// DeleteCallCheck implements store.CallChecks.
func (t *tx) DeleteCallCheck(threadID, callID string) error {
	if _, err := t.tx.Exec(`DELETE FROM call_checks WHERE thread_id = ? AND call_id = ?`, threadID, callID); err != nil {
		return fmt.Errorf("delete the status check of call %s in thread %s: %w", callID, threadID, err)
	}
	return nil
}

// DueCallChecks implements store.CallChecks.
func (t *tx) DueCallChecks(now time.Time, limit int) ([]store.CallCheck, error) {
	return collect(t, "list due call status checks", func(sc scanner) (store.CallCheck, error) {
		var c store.CallCheck
		var due int64
		err := sc.Scan(&c.ThreadID, &c.CallID, &due, &c.Failures)
		c.Due = fromNanos(due)
		return c, err
	}, `SELECT thread_id, call_id, due, failures FROM call_checks WHERE due <= ? ORDER BY due LIMIT ?`, now.UnixNano(), limit)
}

// NextCallCheck implements store.CallChecks.
func (t *tx) NextCallCheck() (time.Time, bool, error) {
	var d sql.NullInt64
	if err := t.tx.QueryRow(`SELECT MIN(due) FROM call_checks`).Scan(&d); err != nil {
		return time.Time{}, false, fmt.Errorf("read the next call status check: %w", err)
	}
	if !d.Valid {
		return time.Time{}, false, nil
	}
	return fromNanos(d.Int64), true, nil
}

// AdvanceCallChecks implements store.CallChecks.
func (t *tx) AdvanceCallChecks(due time.Time) (int64, error) {
	res, err := t.tx.Exec(`UPDATE call_checks SET due = ? WHERE due > ?`, max(nanos(due), 1), nanos(due))
	if err != nil {
		return 0, fmt.Errorf("advance the call status checks: %w", err)
	}
	return res.RowsAffected()
}
