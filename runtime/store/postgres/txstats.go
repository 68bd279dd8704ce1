package postgres

import "sync/atomic"

// TxStats counts the transactions a Store ran since it was opened: what a
// workload costs the database, per operation, independently of timing.
type TxStats struct {
	// Commits is how many read-write transactions committed: each is one
	// durable write (a WAL flush) on the database server.
	Commits int64
	// Views is how many read-only transactions ran (View, QuickView).
	Views int64
	// Retries is how many read-write attempts met a serialization failure
	// or a deadlock and ran again.
	Retries int64
	// Rollbacks is how many read-write transactions were abandoned because
	// their function returned an error.
	Rollbacks int64
}

// Sub returns the counts of s minus those of before: what happened between
// two readings.
func (s TxStats) Sub(before TxStats) TxStats {
	return TxStats{
		Commits: s.Commits - before.Commits, Views: s.Views - before.Views,
		Retries: s.Retries - before.Retries, Rollbacks: s.Rollbacks - before.Rollbacks,
	}
}

// txCounters are a Store's running TxStats.
type txCounters struct {
	commits, views, retries, rollbacks atomic.Int64
}

// TxStats returns the transactions the store ran since it was opened.
func (s *Store) TxStats() TxStats {
	c := &s.txc
	return TxStats{Commits: c.commits.Load(), Views: c.views.Load(), Retries: c.retries.Load(), Rollbacks: c.rollbacks.Load()}
}
