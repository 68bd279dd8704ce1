package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// Client events of threads (migration 10). The engine
// keeps events in memory on SQLite, which one process holds; these records
// make the store meet the same contract as a shared one.

// AppendThreadEvents implements store.ThreadEvents.
func (t *tx) AppendThreadEvents(events []store.ThreadEvent) ([]store.ThreadEvent, error) {
	out := make([]store.ThreadEvent, len(events))
	copy(out, events)
	for i := range out {
		e := &out[i]
		if err := t.tx.QueryRow(`INSERT INTO thread_event_heads (thread_id, last_id) VALUES (?, 1)
			ON CONFLICT (thread_id) DO UPDATE SET last_id = last_id + 1 RETURNING last_id`, e.ThreadID).Scan(&e.ID); err != nil {
			return nil, fmt.Errorf("number an event of thread %s: %w", e.ThreadID, err)
		}
		e.Created = t.stamp(e.Created)
		if _, err := t.tx.Exec(`INSERT INTO thread_events (thread_id, id, type, data, msg_seq, created) VALUES (?, ?, ?, ?, ?, ?)`,
			e.ThreadID, e.ID, e.Type, []byte(e.Data), e.MsgSeq, nanos(e.Created)); err != nil {
			return nil, fmt.Errorf("store event %d of thread %s: %w", e.ID, e.ThreadID, err)
		}
	}
	return out, nil
}

// ThreadEventsAfter implements store.ThreadEvents.
func (t *tx) ThreadEventsAfter(threadID string, after int64, limit int) ([]store.ThreadEvent, error) {
	return collect(t, "read the events of thread "+threadID, func(sc scanner) (store.ThreadEvent, error) {
		e := store.ThreadEvent{ThreadID: threadID}
		var data []byte
		var created int64
		err := sc.Scan(&e.ID, &e.Type, &data, &e.MsgSeq, &created)
		e.Data, e.Created = json.RawMessage(data), fromNanos(created)
		return e, err
	}, `SELECT id, type, data, msg_seq, created FROM thread_events WHERE thread_id = ? AND id > ? ORDER BY id LIMIT ?`, threadID, after, limit)
}

// LastThreadEventID implements store.ThreadEvents.
func (t *tx) LastThreadEventID(threadID string) (int64, error) {
	var last int64
	err := t.tx.QueryRow(`SELECT last_id FROM thread_event_heads WHERE thread_id = ?`, threadID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the last event id of thread %s: %w", threadID, err)
	}
	return last, nil
}

// PruneThreadEvents implements store.ThreadEvents.
func (t *tx) PruneThreadEvents(before time.Time, keep int) (int64, error) {
	res, err := t.tx.Exec(`DELETE FROM thread_events WHERE created < ?
		OR id <= (SELECT last_id FROM thread_event_heads h WHERE h.thread_id = thread_events.thread_id) - ?`, nanos(before), keep)
	if err != nil {
		return 0, fmt.Errorf("prune thread events: %w", err)
	}
	return res.RowsAffected()
}
