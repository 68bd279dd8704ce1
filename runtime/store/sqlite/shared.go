package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// Callback keys and oauth links (migration 9). One process holds a SQLite
// store, so its engine keeps its thread and timer claims in memory: its
// transactions do not implement store.Leases (the thread_leases table and
// the timers' claim columns of migration 9 stay, unused).

// CallbackKeys implements store.CallbackKeyStore.
func (t *tx) CallbackKeys() (store.CallbackKeys, error) {
	var k store.CallbackKeys
	var until int64
	err := t.tx.QueryRow(`SELECT current, previous, previous_until FROM callback_keys WHERE id = 1`).Scan(&k.Current, &k.Previous, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return k, backend.NotFound("callback key", "current")
	}
	if err != nil {
		return k, fmt.Errorf("read the callback keys: %w", err)
	}
	k.PreviousUntil = fromNanos(until)
	return k, nil
}

// InitCallbackKey implements store.CallbackKeyStore.
func (t *tx) InitCallbackKey(key []byte) (store.CallbackKeys, error) {
	if len(key) == 0 {
		return store.CallbackKeys{}, errors.New("store the callback key: empty key")
	}
	if _, err := t.tx.Exec(`INSERT INTO callback_keys (id, current) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, key); err != nil {
		return store.CallbackKeys{}, fmt.Errorf("store the callback key: %w", err)
	}
	return t.CallbackKeys()
}

// RotateCallbackKey implements store.CallbackKeyStore.
func (t *tx) RotateCallbackKey(key []byte, graceUntil time.Time) error {
	if len(key) == 0 {
		return errors.New("rotate the callback key: empty key")
	}
	res, err := t.tx.Exec(`UPDATE callback_keys SET previous = current, previous_until = ?, current = ? WHERE id = 1`, nanos(graceUntil), key)
	if err != nil {
		return fmt.Errorf("rotate the callback key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		_, err := t.InitCallbackKey(key)
		return err
	}
	return nil
}

// PutOAuthLink implements store.OAuthLinks.
func (t *tx) PutOAuthLink(l store.OAuthLink) error {
	_, err := t.tx.Exec(`INSERT INTO oauth_links (thread_id, call_id, event, created, expires) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET event = excluded.event, created = excluded.created, expires = excluded.expires`,
		l.ThreadID, l.CallID, []byte(l.Event), nanos(t.stamp(l.Created)), nanos(l.Expires))
	if err != nil {
		return fmt.Errorf("store the oauth link of call %s of thread %s: %w", l.CallID, l.ThreadID, err)
	}
	return nil
}

// ThreadOAuthLinks implements store.OAuthLinks.
func (t *tx) ThreadOAuthLinks(threadID string, now time.Time) ([]store.OAuthLink, error) {
	return collect(t, "list the oauth links of thread "+threadID, func(sc scanner) (store.OAuthLink, error) {
		l := store.OAuthLink{ThreadID: threadID}
		var event []byte
		var created, expires int64
		err := sc.Scan(&l.CallID, &event, &created, &expires)
		l.Event, l.Created, l.Expires = json.RawMessage(event), fromNanos(created), fromNanos(expires)
		return l, err
	}, `SELECT call_id, event, created, expires FROM oauth_links WHERE thread_id = ? AND expires > ? ORDER BY created, call_id`, threadID, nanos(now))
}

// DeleteOAuthLink implements store.OAuthLinks.
func (t *tx) DeleteOAuthLink(threadID, callID string) error {
	if _, err := t.tx.Exec(`DELETE FROM oauth_links WHERE thread_id = ? AND call_id = ?`, threadID, callID); err != nil {
		return fmt.Errorf("delete the oauth link of call %s of thread %s: %w", callID, threadID, err)
	}
	return nil
}

// DeleteExpiredOAuthLinks implements store.OAuthLinks.
func (t *tx) DeleteExpiredOAuthLinks(now time.Time) (int64, error) {
	res, err := t.tx.Exec(`DELETE FROM oauth_links WHERE expires <= ?`, nanos(now))
	if err != nil {
		return 0, fmt.Errorf("delete expired oauth links: %w", err)
	}
	return res.RowsAffected()
}
