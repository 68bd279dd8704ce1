package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"

	"database/sql"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// SessionThreads implements store.Sessions.
func (t *tx) SessionThreads(rootID string) ([]store.Thread, error) {
	threads, err := collect(t, "list the threads of session "+rootID, scanThread,
		`SELECT `+threadCols+` FROM threads WHERE root_id = ? ORDER BY created, id`, rootID)
	if err != nil {
		return nil, err
	}
	return backend.ParentsFirst(threads), nil
}

// ThreadTimers implements store.Sessions.
func (t *tx) ThreadTimers(threadID string) ([]store.Timer, error) {
	return collect(t, "list the timers of thread "+threadID, scanTimer,
		`SELECT `+timerCols+` FROM timers WHERE thread_id = ? ORDER BY due, id`, threadID)
}

// ThreadSeenKeys implements store.Sessions.
func (t *tx) ThreadSeenKeys(threadID string) ([]string, error) {
	return collect(t, "list the seen keys of thread "+threadID, scanString, `SELECT key FROM seen_keys WHERE thread_id = ?`, threadID)
}

// ThreadHeldEvents implements store.Sessions.
func (t *tx) ThreadHeldEvents(threadID string) ([]store.HeldEvent, error) {
	return collect(t, "list the held events of thread "+threadID, func(sc scanner) (store.HeldEvent, error) {
		e := store.HeldEvent{ThreadID: threadID}
		var payload string
		var created int64
		err := sc.Scan(&e.ID, &e.CallID, &payload, &created)
		e.Payload, e.Created = json.RawMessage(payload), fromNanos(created)
		return e, err
	}, `SELECT id, call_id, payload, created FROM held_events WHERE thread_id = ? ORDER BY id`, threadID)
}

// ThreadCallChecks implements store.Sessions.
func (t *tx) ThreadCallChecks(threadID string) ([]store.CallCheck, error) {
	return collect(t, "list the call checks of thread "+threadID, func(sc scanner) (store.CallCheck, error) {
		c := store.CallCheck{ThreadID: threadID}
		var due int64
		err := sc.Scan(&c.CallID, &due, &c.Failures)
		c.Due = fromNanos(due)
		return c, err
	}, `SELECT call_id, due, failures FROM call_checks WHERE thread_id = ? ORDER BY due, call_id`, threadID)
}

// SessionTrust implements store.Sessions.
func (t *tx) SessionTrust(rootID string) (map[string]string, error) {
	type pair struct{ url, digest string }
	pairs, err := collect(t, "list the trusted toolsets of session "+rootID, func(sc scanner) (pair, error) {
		var p pair
		err := sc.Scan(&p.url, &p.digest)
		return p, err
	}, `SELECT base_url, sha256 FROM toolset_trust WHERE root_id = ?`, rootID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		out[p.url] = p.digest
	}
	return out, nil
}

// DeleteSession implements store.Sessions.
func (t *tx) DeleteSession(rootID string) (int, error) {
	threads, err := t.SessionThreads(rootID)
	if err != nil || len(threads) == 0 {
		return 0, err
	}
	if t.tx.rows != nil {
		// The row cache must not answer for what is deleted here.
		for _, th := range threads {
			calls, err := t.ThreadCalls(th.ID)
			if err != nil {
				return 0, err
			}
			for _, c := range calls {
				t.tx.overlay.forgetCall(callKey{c.ThreadID, c.CallID})
			}
			t.tx.overlay.forget(th.ID)
			t.tx.overlay.pending.forget(th.ID)
		}
	}
	for _, table := range backend.SessionTables {
		if _, err := t.tx.Exec(`DELETE FROM `+table+` WHERE thread_id IN (SELECT id FROM threads WHERE root_id = ?)`, rootID); err != nil {
			return 0, fmt.Errorf("delete session %s (%s): %w", rootID, table, err)
		}
	}
	for _, table := range []string{"toolset_cache", "toolset_trust"} {
		if _, err := t.tx.Exec(`DELETE FROM `+table+` WHERE root_id = ?`, rootID); err != nil {
			return 0, fmt.Errorf("delete session %s (%s): %w", rootID, table, err)
		}
	}
	// Children before parents: parent_id references threads(id).
	for i := len(threads) - 1; i >= 0; i-- {
		if _, err := t.tx.Exec(`DELETE FROM threads WHERE id = ?`, threads[i].ID); err != nil {
			return 0, fmt.Errorf("delete thread %s of session %s: %w", threads[i].ID, rootID, err)
		}
	}
	return len(threads), nil
}

// Moves

// PutMove implements store.Moves.
func (t *tx) PutMove(m store.Move) error {
	var data any
	if len(m.Data) > 0 {
		data = string(m.Data)
	}
	_, err := t.tx.Exec(`INSERT INTO session_moves (root_id, direction, id, state, peer, secret, data, created, updated, expires)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (root_id, direction) DO UPDATE SET id = excluded.id, state = excluded.state, peer = excluded.peer,
		secret = excluded.secret, data = excluded.data, updated = excluded.updated, expires = excluded.expires`,
		m.RootID, string(m.Direction), m.ID, string(m.State), m.Peer, m.Secret, data,
		nanos(t.stamp(m.Created)), nanos(t.now), nanos(m.Expires))
	if err != nil {
		return fmt.Errorf("record the move of session %s: %w", m.RootID, err)
	}
	return nil
}

const moveCols = `root_id, direction, id, state, peer, secret, COALESCE(data, ''), created, updated, expires`

func scanMove(sc scanner) (store.Move, error) {
	var m store.Move
	var data string
	var created, updated, expires int64
	err := sc.Scan(&m.RootID, &m.Direction, &m.ID, &m.State, &m.Peer, &m.Secret, &data, &created, &updated, &expires)
	if data != "" {
		m.Data = json.RawMessage(data)
	}
	m.Created, m.Updated, m.Expires = fromNanos(created), fromNanos(updated), fromNanos(expires)
	return m, err
}

// SessionMove implements store.Moves.
func (t *tx) SessionMove(rootID string, dir store.MoveDirection) (store.Move, error) {
	m, err := scanMove(t.tx.QueryRow(`SELECT `+moveCols+` FROM session_moves WHERE root_id = ? AND direction = ?`, rootID, string(dir)))
	if errors.Is(err, sql.ErrNoRows) {
		return m, backend.NotFound("move of session", rootID)
	}
	if err != nil {
		return m, fmt.Errorf("read the move of session %s: %w", rootID, err)
	}
	return m, nil
}

// ListMoves implements store.Moves.
func (t *tx) ListMoves() ([]store.Move, error) {
	return collect(t, "list the moves of sessions", scanMove,
		`SELECT `+moveCols+` FROM session_moves ORDER BY created, root_id, direction`)
}

// DeleteMove implements store.Moves.
func (t *tx) DeleteMove(rootID string, dir store.MoveDirection) error {
	if _, err := t.tx.Exec(`DELETE FROM session_moves WHERE root_id = ? AND direction = ?`, rootID, string(dir)); err != nil {
		return fmt.Errorf("delete the move of session %s: %w", rootID, err)
	}
	return nil
}

// ThreadUsage implements store.Sessions.
func (t *tx) ThreadUsage(threadID string) (store.Usage, error) {
	var total store.Usage
	usages, err := collect(t, "read the token usage of thread "+threadID, func(sc scanner) (*store.Usage, error) {
		var b []byte
		if err := sc.Scan(&b); err != nil {
			return nil, err
		}
		return backend.DecodeUsage(b)
	}, `SELECT usage FROM messages WHERE thread_id = ? AND usage IS NOT NULL`, threadID)
	if err != nil {
		return total, err
	}
	for _, u := range usages {
		if u != nil {
			total.Add(*u)
		}
	}
	return total, nil
}
