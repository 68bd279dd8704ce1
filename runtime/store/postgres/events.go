package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gorap/gorap/runtime/store"
)

// Client events of threads, shared by every process (migration 3).
// Each append takes the thread's next ids from
// thread_event_heads, whose row it updates: appends to one thread commit
// one after the other, so ids are in commit order, and it sends a NOTIFY
// on EventsChannel that listeners receive at commit.

// EventsChannel is the LISTEN/NOTIFY channel of thread events. Its payload
// is "THREAD_ID LAST_ID".
const EventsChannel = "rap_events"

// appendEventsSQL appends the events of one thread: it takes the next ids
// from the thread's head ($2 of them), inserts the events (the arrays $3
// to $6, in order) and notifies $7, all in one statement.
const appendEventsSQL = `WITH head AS (
		INSERT INTO thread_event_heads (thread_id, last_id) VALUES ($1, $2)
		ON CONFLICT (thread_id) DO UPDATE SET last_id = thread_event_heads.last_id + excluded.last_id
		RETURNING last_id
	), stored AS (
		INSERT INTO thread_events (thread_id, id, type, data, msg_seq, created)
		SELECT $1, head.last_id - $2 + e.n, e.type, e.data, e.msg_seq, e.created
		FROM head, unnest($3::text[], $4::bytea[], $5::bigint[], $6::timestamptz[]) WITH ORDINALITY AS e(type, data, msg_seq, created, n)
	), notified AS (
		SELECT pg_notify($7, $1 || ' ' || last_id::text) FROM head
	)
	SELECT last_id FROM head, notified`

// AppendThreadEvents implements store.ThreadEvents: one statement per
// thread, all sent in one round trip.
func (t *tx) AppendThreadEvents(events []store.ThreadEvent) ([]store.ThreadEvent, error) {
	out := make([]store.ThreadEvent, len(events))
	copy(out, events)
	// The threads in order of first appearance, with their events.
	var order []string
	byThread := map[string][]int{}
	for i, e := range out {
		if _, ok := byThread[e.ThreadID]; !ok {
			order = append(order, e.ThreadID)
		}
		byThread[e.ThreadID] = append(byThread[e.ThreadID], i)
	}
	if len(order) == 0 {
		return out, nil
	}
	b := &pgx.Batch{}
	for _, th := range order {
		idx := byThread[th]
		types := make([]string, len(idx))
		data := make([][]byte, len(idx))
		seqs := make([]int64, len(idx))
		created := make([]time.Time, len(idx))
		for j, i := range idx {
			e := &out[i]
			e.Created = t.stamp(e.Created)
			types[j], data[j], seqs[j], created[j] = e.Type, bin(string(e.Data)), e.MsgSeq, e.Created
		}
		b.Queue(appendEventsSQL, th, int64(len(idx)), types, data, seqs, created, EventsChannel)
	}
	br, err := t.sendBatch(b)
	if err != nil {
		return nil, fmt.Errorf("store thread events: %w", err)
	}
	for _, th := range order {
		idx := byThread[th]
		var last int64
		if err := t.note(br.QueryRow().Scan(&last)); err != nil {
			br.Close()
			return nil, fmt.Errorf("store the events of thread %s: %w", th, err)
		}
		id := last - int64(len(idx))
		for _, i := range idx {
			id++
			out[i].ID = id
		}
	}
	if err := t.note(br.Close()); err != nil {
		return nil, fmt.Errorf("store thread events: %w", err)
	}
	return out, nil
}

// ThreadEventsAfter implements store.ThreadEvents.
func (t *tx) ThreadEventsAfter(threadID string, after int64, limit int) ([]store.ThreadEvent, error) {
	return collect(t, "read the events of thread "+threadID, func(rows pgx.Rows) (store.ThreadEvent, error) {
		e := store.ThreadEvent{ThreadID: threadID}
		var data []byte
		err := rows.Scan(&e.ID, &e.Type, &data, &e.MsgSeq, &e.Created)
		e.Data, e.Created = json.RawMessage(data), utc(e.Created)
		return e, err
	}, `SELECT id, type, data, msg_seq, created FROM thread_events WHERE thread_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		threadID, after, limit)
}

// LastThreadEventID implements store.ThreadEvents.
func (t *tx) LastThreadEventID(threadID string) (int64, error) {
	var last int64
	err := t.queryRow(`SELECT last_id FROM thread_event_heads WHERE thread_id = $1`, threadID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the last event id of thread %s: %w", threadID, err)
	}
	return last, nil
}

// PruneThreadEvents implements store.ThreadEvents.
func (t *tx) PruneThreadEvents(before time.Time, keep int) (int64, error) {
	tag, err := t.exec(`DELETE FROM thread_events e USING thread_event_heads h
		WHERE e.thread_id = h.thread_id AND (e.created < $1 OR e.id <= h.last_id - $2)`, before, int64(keep))
	if err != nil {
		return 0, fmt.Errorf("prune thread events: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ListenThreadEvents implements store.EventListener: it listens on the
// Store's one LISTEN connection (listen.go) until ctx ends or the
// connection fails.
func (s *Store) ListenThreadEvents(ctx context.Context, notify func(threadID string, lastID int64)) error {
	return s.listen(ctx, EventsChannel, "events", nil, func(payload string) {
		i := strings.LastIndexByte(payload, ' ')
		if i < 0 {
			return
		}
		if last, err := strconv.ParseInt(payload[i+1:], 10, 64); err == nil {
			notify(payload[:i], last)
		}
	})
}
