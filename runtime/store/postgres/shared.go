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

// Leases, callback keys and oauth links (migration 2).

// The store's transactions split the work between processes.
var _ store.Leases = (*tx)(nil)

// ClaimThread implements store.Leases.
func (t *tx) ClaimThread(threadID, owner string, now, until time.Time) (bool, error) {
	tag, err := t.exec(`INSERT INTO thread_leases (thread_id, owner, until) VALUES ($1, $2, $3)
		ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner, until = excluded.until
		WHERE thread_leases.owner = excluded.owner OR thread_leases.until <= $4`,
		threadID, owner, until, now)
	if err != nil {
		return false, fmt.Errorf("claim thread %s: %w", threadID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseThread implements store.Leases.
func (t *tx) ReleaseThread(threadID, owner string) error {
	if _, err := t.exec(`DELETE FROM thread_leases WHERE thread_id = $1 AND owner = $2`, threadID, owner); err != nil {
		return fmt.Errorf("release thread %s: %w", threadID, err)
	}
	return nil
}

// ThreadLease implements store.Leases.
func (t *tx) ThreadLease(threadID string) (string, time.Time, error) {
	var owner string
	var until time.Time
	err := t.queryRow(`SELECT owner, until FROM thread_leases WHERE thread_id = $1`, threadID).Scan(&owner, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, backend.NotFound("thread lease", threadID)
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read the lease of thread %s: %w", threadID, err)
	}
	return owner, utc(until), nil
}

// ClaimTimer implements store.Leases.
func (t *tx) ClaimTimer(id, owner string, now, until time.Time) (bool, error) {
	tag, err := t.exec(`UPDATE timers SET claim_owner = $1, claim_until = $2 WHERE id = $3 AND (claim_owner IN ('', $1) OR claim_until <= $4)`,
		owner, until, id, now)
	if err != nil {
		return false, fmt.Errorf("claim timer %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CallbackKeys implements store.CallbackKeyStore.
func (t *tx) CallbackKeys() (store.CallbackKeys, error) {
	var k store.CallbackKeys
	var until *time.Time
	err := t.queryRow(`SELECT current, previous, previous_until FROM callback_keys WHERE id = 1`).Scan(&k.Current, &k.Previous, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, backend.NotFound("callback key", "current")
	}
	if err != nil {
		return k, fmt.Errorf("read the callback keys: %w", err)
	}
	k.PreviousUntil = utcPtr(until)
	return k, nil
}

// InitCallbackKey implements store.CallbackKeyStore.
func (t *tx) InitCallbackKey(key []byte) (store.CallbackKeys, error) {
	if len(key) == 0 {
		return store.CallbackKeys{}, errors.New("store the callback key: empty key")
	}
	if _, err := t.exec(`INSERT INTO callback_keys (id, current) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, key); err != nil {
		return store.CallbackKeys{}, fmt.Errorf("store the callback key: %w", err)
	}
	return t.CallbackKeys()
}

// RotateCallbackKey implements store.CallbackKeyStore.
func (t *tx) RotateCallbackKey(key []byte, graceUntil time.Time) error {
	if len(key) == 0 {
		return errors.New("rotate the callback key: empty key")
	}
	tag, err := t.exec(`UPDATE callback_keys SET previous = current, previous_until = $1, current = $2 WHERE id = 1`, graceUntil, key)
	if err != nil {
		return fmt.Errorf("rotate the callback key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		_, err := t.InitCallbackKey(key)
		return err
	}
	return nil
}

// PutOAuthLink implements store.OAuthLinks.
func (t *tx) PutOAuthLink(l store.OAuthLink) error {
	_, err := t.exec(`INSERT INTO oauth_links (thread_id, call_id, event, created, expires) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (thread_id, call_id) DO UPDATE SET event = excluded.event, created = excluded.created, expires = excluded.expires`,
		l.ThreadID, l.CallID, bin(string(l.Event)), t.stamp(l.Created), l.Expires)
	if err != nil {
		return fmt.Errorf("store the oauth link of call %s of thread %s: %w", l.CallID, l.ThreadID, err)
	}
	return nil
}

// ThreadOAuthLinks implements store.OAuthLinks.
func (t *tx) ThreadOAuthLinks(threadID string, now time.Time) ([]store.OAuthLink, error) {
	return collect(t, "list the oauth links of thread "+threadID, func(rows pgx.Rows) (store.OAuthLink, error) {
		l := store.OAuthLink{ThreadID: threadID}
		var event []byte
		err := rows.Scan(&l.CallID, &event, &l.Created, &l.Expires)
		l.Event, l.Created, l.Expires = json.RawMessage(event), utc(l.Created), utc(l.Expires)
		return l, err
	}, `SELECT call_id, event, created, expires FROM oauth_links WHERE thread_id = $1 AND expires > $2 ORDER BY created, call_id`, threadID, now)
}

// DeleteOAuthLink implements store.OAuthLinks.
func (t *tx) DeleteOAuthLink(threadID, callID string) error {
	if _, err := t.exec(`DELETE FROM oauth_links WHERE thread_id = $1 AND call_id = $2`, threadID, callID); err != nil {
		return fmt.Errorf("delete the oauth link of call %s of thread %s: %w", callID, threadID, err)
	}
	return nil
}

// DeleteExpiredOAuthLinks implements store.OAuthLinks.
func (t *tx) DeleteExpiredOAuthLinks(now time.Time) (int64, error) {
	tag, err := t.exec(`DELETE FROM oauth_links WHERE expires <= $1`, now)
	if err != nil {
		return 0, fmt.Errorf("delete expired oauth links: %w", err)
	}
	return tag.RowsAffected(), nil
}
