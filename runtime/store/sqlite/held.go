package sqlite

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// Held subscription events (migration 5).

// HoldEvent implements store.HeldEvents.
func (t *tx) HoldEvent(e store.HeldEvent) error {
	if err := backend.CheckHeldEvent(e); err != nil {
		return err
	}
	if _, err := t.tx.Exec(`INSERT INTO held_events (thread_id, call_id, payload, created) VALUES (?, ?, ?, ?)`,
		e.ThreadID, e.CallID, string(e.Payload), nanos(t.stamp(e.Created))); err != nil {
		return fmt.Errorf("hold subscription event of call %s of thread %s: %w", e.CallID, e.ThreadID, err)
	}
	return nil
}

// HeldEventStats implements store.HeldEvents.
func (t *tx) HeldEventStats(threadID, callID string) (store.HeldStats, error) {
	var s store.HeldStats
	err := t.tx.QueryRow(`SELECT
		(SELECT COUNT(*) FROM held_events WHERE thread_id = ? AND call_id = ?),
		(SELECT COALESCE(SUM(LENGTH(CAST(payload AS BLOB))), 0) FROM held_events WHERE thread_id = ? AND call_id = ?),
		(SELECT COALESCE(SUM(LENGTH(CAST(payload AS BLOB))), 0) FROM held_events)`,
		threadID, callID, threadID, callID).Scan(&s.Count, &s.Bytes, &s.TotalBytes)
	if err != nil {
		return s, fmt.Errorf("size the held subscription events of call %s of thread %s: %w", callID, threadID, err)
	}
	return s, nil
}

// TakeHeldEvents implements store.HeldEvents.
func (t *tx) TakeHeldEvents(threadID, callID string) ([]store.HeldEvent, error) {
	out, err := collect(t, fmt.Sprintf("take the held subscription events of call %s of thread %s", callID, threadID), func(sc scanner) (store.HeldEvent, error) {
		e := store.HeldEvent{ThreadID: threadID, CallID: callID}
		var payload string
		var created int64
		err := sc.Scan(&e.ID, &payload, &created)
		e.Payload, e.Created = json.RawMessage(payload), fromNanos(created)
		return e, err
	}, `DELETE FROM held_events WHERE thread_id = ? AND call_id = ? RETURNING id, payload, created`, threadID, callID)
	if err != nil {
		return nil, err
	}
	// RETURNING gives no order guarantee: sort by arrival.
	slices.SortFunc(out, func(a, b store.HeldEvent) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// EndedHeldCalls implements store.HeldEvents. The few held events drive
// the query (CROSS JOIN keeps them the outer loop), so its cost does not
// grow with the calls table.
func (t *tx) EndedHeldCalls() ([]store.Call, error) {
	return collect(t, "list ended calls with held subscription events", scanCall, endedHeldCallsSQL)
}

const endedHeldCallsSQL = `SELECT c.thread_id, c.call_id, c.tool_name, c.arguments, c.toolset, c.endpoint, c.turn_seq, c.state, COALESCE(c.deadline, 0), c.created, c.updated
	FROM (SELECT DISTINCT thread_id, call_id FROM held_events) h
	CROSS JOIN calls c ON c.thread_id = h.thread_id AND c.call_id = h.call_id
	WHERE NOT ` + pendingCalls + `
	ORDER BY c.created, c.call_id`
