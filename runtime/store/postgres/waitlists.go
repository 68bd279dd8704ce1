package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/gorap/gorap/runtime/store"
)

var _ store.WaitLists = (*tx)(nil)

// OldestActiveSubscriptions implements store.WaitLists.
func (t *tx) OldestActiveSubscriptions(userID string, limit int) ([]store.Subscription, error) {
	if limit < 1 {
		return nil, nil
	}
	scan := func(rows pgx.Rows) (store.Subscription, error) { return scanSubscription(rows) }
	const cols = `SELECT thread_id, call_id, tool_name, state, created FROM subscriptions WHERE state = $1`
	if userID == "" {
		return collect(t, "list the oldest active subscriptions", scan,
			cols+` ORDER BY created, thread_id, call_id LIMIT $2`, string(store.SubscriptionActive), limit)
	}
	return collect(t, "list the oldest active subscriptions", scan,
		cols+` AND thread_id IN (SELECT id FROM threads WHERE user_id = $3) ORDER BY created, thread_id, call_id LIMIT $2`,
		string(store.SubscriptionActive), limit, userID)
}

// TimersOfKind implements store.WaitLists.
func (t *tx) TimersOfKind(kind string, limit int) ([]store.Timer, error) {
	if limit < 1 {
		return nil, nil
	}
	return collect(t, "list timers of kind "+kind, scanTimerRows, `SELECT id, thread_id, kind, payload, due, created FROM timers WHERE kind = $1 ORDER BY due, id LIMIT $2`, kind, limit)
}
