package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// SessionThreads implements store.Sessions.
func (t *tx) SessionThreads(rootID string) ([]store.Thread, error) {
	threads, err := collect(t, "list the threads of session "+rootID, scanThreadRows,
		`SELECT `+threadCols+` FROM threads WHERE root_id = $1 ORDER BY created, id`, rootID)
	if err != nil {
		return nil, err
	}
	return backend.ParentsFirst(threads), nil
}

// ThreadTimers implements store.Sessions.
func (t *tx) ThreadTimers(threadID string) ([]store.Timer, error) {
	return collect(t, "list the timers of thread "+threadID, scanTimerRows, threadTimersSQL, threadID)
}

// threadTimersSQL reads a thread's timers ($1), soonest first.
const threadTimersSQL = `SELECT id, thread_id, kind, payload, due, created FROM timers WHERE thread_id = $1 ORDER BY due, id`

func scanTimerRows(rows pgx.Rows) (store.Timer, error) {
	var tm store.Timer
	var payload []byte
	err := rows.Scan(&tm.ID, &tm.ThreadID, &tm.Kind, &payload, &tm.Due, &tm.Created)
	if len(payload) > 0 {
		tm.Payload = json.RawMessage(payload)
	}
	tm.Due, tm.Created = utc(tm.Due), utc(tm.Created)
	return tm, err
}

// ThreadSeenKeys implements store.Sessions.
func (t *tx) ThreadSeenKeys(threadID string) ([]string, error) {
	return collect(t, "list the seen keys of thread "+threadID, func(rows pgx.Rows) (string, error) {
		var k []byte
		err := rows.Scan(&k)
		return string(k), err
	}, `SELECT key FROM seen_keys WHERE thread_id = $1`, threadID)
}

// ThreadHeldEvents implements store.Sessions.
func (t *tx) ThreadHeldEvents(threadID string) ([]store.HeldEvent, error) {
	return collect(t, "list the held events of thread "+threadID, func(rows pgx.Rows) (store.HeldEvent, error) {
		e := store.HeldEvent{ThreadID: threadID}
		var payload []byte
		err := rows.Scan(&e.ID, &e.CallID, &payload, &e.Created)
		e.Payload, e.Created = json.RawMessage(payload), utc(e.Created)
		return e, err
	}, `SELECT id, call_id, payload, created FROM held_events WHERE thread_id = $1 ORDER BY id`, threadID)
}

// ThreadCallChecks implements store.Sessions.
func (t *tx) ThreadCallChecks(threadID string) ([]store.CallCheck, error) {
	return collect(t, "list the call checks of thread "+threadID, func(rows pgx.Rows) (store.CallCheck, error) {
		c := store.CallCheck{ThreadID: threadID}
		err := rows.Scan(&c.CallID, &c.Due, &c.Failures)
		c.Due = utc(c.Due)
		return c, err
	}, `SELECT call_id, due, failures FROM call_checks WHERE thread_id = $1 ORDER BY due, call_id`, threadID)
}

// SessionTrust implements store.Sessions.
func (t *tx) SessionTrust(rootID string) (map[string]string, error) {
	type pair struct{ url, digest string }
	pairs, err := collect(t, "list the trusted toolsets of session "+rootID, func(rows pgx.Rows) (pair, error) {
		var p pair
		err := rows.Scan(&p.url, &p.digest)
		return p, err
	}, `SELECT base_url, sha256 FROM toolset_trust WHERE root_id = $1`, rootID)
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		out[p.url] = p.digest
	}
	return out, err
}

// DeleteSession implements store.Sessions.
func (t *tx) DeleteSession(rootID string) (int, error) {
	threads, err := t.SessionThreads(rootID)
	if err != nil || len(threads) == 0 {
		return 0, err
	}
	ids := make([]string, len(threads))
	for i, th := range threads {
		ids[i] = th.ID
	}
	for _, table := range backend.SessionTables {
		if _, err := t.exec(`DELETE FROM `+table+` WHERE thread_id = ANY($1)`, ids); err != nil {
			return 0, fmt.Errorf("delete session %s (%s): %w", rootID, table, err)
		}
	}
	for _, table := range []string{"toolset_cache", "toolset_trust"} {
		if _, err := t.exec(`DELETE FROM `+table+` WHERE root_id = $1`, rootID); err != nil {
			return 0, fmt.Errorf("delete session %s (%s): %w", rootID, table, err)
		}
	}
	// One statement: PostgreSQL checks parent_id's reference at its end.
	if _, err := t.exec(`DELETE FROM threads WHERE id = ANY($1)`, ids); err != nil {
		return 0, fmt.Errorf("delete the threads of session %s: %w", rootID, err)
	}
	return len(threads), nil
}

// PutMove implements store.Moves.
func (t *tx) PutMove(m store.Move) error {
	var data any
	if len(m.Data) > 0 {
		data = []byte(m.Data)
	}
	_, err := t.exec(`INSERT INTO session_moves (root_id, direction, id, state, peer, secret, data, created, updated, expires)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (root_id, direction) DO UPDATE SET id = excluded.id, state = excluded.state, peer = excluded.peer,
		secret = excluded.secret, data = excluded.data, updated = excluded.updated, expires = excluded.expires`,
		m.RootID, string(m.Direction), m.ID, string(m.State), m.Peer, m.Secret, data,
		t.stamp(m.Created), t.now, nullTime(m.Expires))
	if err != nil {
		return fmt.Errorf("record the move of session %s: %w", m.RootID, err)
	}
	return nil
}

const moveCols = `root_id, direction, id, state, peer, secret, data, created, updated, expires`

func scanMove(sc interface{ Scan(...any) error }) (store.Move, error) {
	var m store.Move
	var dir, state string
	var data []byte
	var expires *time.Time
	err := sc.Scan(&m.RootID, &dir, &m.ID, &state, &m.Peer, &m.Secret, &data, &m.Created, &m.Updated, &expires)
	m.Direction, m.State = store.MoveDirection(dir), store.MoveState(state)
	if len(data) > 0 {
		m.Data = json.RawMessage(data)
	}
	m.Created, m.Updated, m.Expires = utc(m.Created), utc(m.Updated), utcPtr(expires)
	return m, err
}

// SessionMove implements store.Moves.
func (t *tx) SessionMove(rootID string, dir store.MoveDirection) (store.Move, error) {
	m, err := scanMove(t.queryRow(`SELECT `+moveCols+` FROM session_moves WHERE root_id = $1 AND direction = $2`, rootID, string(dir)))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, backend.NotFound("move of session", rootID)
	}
	if err != nil {
		return m, fmt.Errorf("read the move of session %s: %w", rootID, err)
	}
	return m, nil
}

// ListMoves implements store.Moves.
func (t *tx) ListMoves() ([]store.Move, error) {
	return collect(t, "list the moves of sessions", func(rows pgx.Rows) (store.Move, error) { return scanMove(rows) },
		`SELECT `+moveCols+` FROM session_moves ORDER BY created, root_id, direction`)
}

// DeleteMove implements store.Moves.
func (t *tx) DeleteMove(rootID string, dir store.MoveDirection) error {
	if _, err := t.exec(`DELETE FROM session_moves WHERE root_id = $1 AND direction = $2`, rootID, string(dir)); err != nil {
		return fmt.Errorf("delete the move of session %s: %w", rootID, err)
	}
	return nil
}

// ThreadUsage implements store.Sessions.
func (t *tx) ThreadUsage(threadID string) (store.Usage, error) {
	var total store.Usage
	recs, err := collect(t, "read the token usage of thread "+threadID, func(rows pgx.Rows) ([]byte, error) {
		var b []byte
		err := rows.Scan(&b)
		return b, err
	}, `SELECT usage FROM messages WHERE thread_id = $1 AND usage IS NOT NULL`, threadID)
	if err != nil {
		return total, err
	}
	for _, b := range recs {
		u, err := backend.DecodeUsage(b)
		if err != nil {
			return total, fmt.Errorf("read the token usage of thread %s: %w", threadID, err)
		}
		if u != nil {
			total.Add(*u)
		}
	}
	return total, nil
}
