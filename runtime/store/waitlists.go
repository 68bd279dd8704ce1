package store

// WaitLists is implemented by the transactions of a store that can list,
// store-wide and oldest first, two kinds of waits no pending call shows:
// active subscriptions and timers of one kind (the engine's retries of
// failed completions). The waiting list of the client API (GET
// /v1/waiting) reads them; like Censuses it is not part of Tx: the engine
// asserts it, and a store without it lists only pending calls.
//
// Each reads at most limit rows. Subscriptions are few next to calls and
// their table has no index by state: OldestActiveSubscriptions reads the
// active ones of the whole table to sort them, a cost bounded by the
// subscriptions running, not by the store's history.
type WaitLists interface {
	// OldestActiveSubscriptions returns up to limit active subscriptions,
	// oldest first (by Created, then thread and call id); of userID's
	// threads only when userID is not "".
	OldestActiveSubscriptions(userID string, limit int) ([]Subscription, error)
	// TimersOfKind returns up to limit timers of kind, the earliest due
	// first.
	TimersOfKind(kind string, limit int) ([]Timer, error)
}
