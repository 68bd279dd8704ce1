package sqlite

import "github.com/gorap/gorap/runtime/store"

var _ store.WaitLists = (*tx)(nil)

// OldestActiveSubscriptions implements store.WaitLists.
func (t *tx) OldestActiveSubscriptions(userID string, limit int) ([]store.Subscription, error) {
	if limit < 1 {
		return nil, nil
	}
	const cols = `SELECT thread_id, call_id, tool_name, state, created FROM subscriptions WHERE state = ?`
	if userID == "" {
		return collect(t, "list the oldest active subscriptions", scanSubscription,
			cols+` ORDER BY created, thread_id, call_id LIMIT ?`, string(store.SubscriptionActive), limit)
	}
	return collect(t, "list the oldest active subscriptions", scanSubscription,
		cols+` AND thread_id IN (SELECT id FROM threads WHERE user_id = ?) ORDER BY created, thread_id, call_id LIMIT ?`,
		string(store.SubscriptionActive), userID, limit)
}

// TimersOfKind implements store.WaitLists.
func (t *tx) TimersOfKind(kind string, limit int) ([]store.Timer, error) {
	if limit < 1 {
		return nil, nil
	}
	return collect(t, "list timers of kind "+kind, scanTimer,
		`SELECT `+timerCols+` FROM timers WHERE kind = ? ORDER BY due, id LIMIT ?`, kind, limit)
}
