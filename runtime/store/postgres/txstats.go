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
	// RoundTrips is how many times the store sent statements and waited
	// for the database's answer: in transactions (BEGIN rides with the
	// first statement; a batch of statements is one; COMMIT or ROLLBACK is
	// one), in reads outside a transaction (ReadOne), and in sending text
	// deltas. Each costs the database server a wake-up and a reply, the
	// larger part of its CPU for the runtime's short statements.
	RoundTrips int64
}

// Sub returns the counts of s minus those of before: what happened between
// two readings.
func (s TxStats) Sub(before TxStats) TxStats {
	return TxStats{
		Commits: s.Commits - before.Commits, Views: s.Views - before.Views,
		Retries: s.Retries - before.Retries, Rollbacks: s.Rollbacks - before.Rollbacks,
		RoundTrips: s.RoundTrips - before.RoundTrips,
	}
}

// txCounters are a Store's running TxStats.
type txCounters struct {
	commits, views, retries, rollbacks, roundTrips atomic.Int64
}

// TxStats returns the transactions the store ran since it was opened.
func (s *Store) TxStats() TxStats {
	c := &s.txc
	return TxStats{Commits: c.commits.Load(), Views: c.views.Load(), Retries: c.retries.Load(), Rollbacks: c.rollbacks.Load(),
		RoundTrips: c.roundTrips.Load()}
}
