package sqlite

// This file owns the census of the store (store.Censuses): its threads by
// what they wait for and its pending calls by age, for the runtime's
// metrics.

import (
	"fmt"
	"strings"

	"github.com/gorap/gorap/runtime/store"
)

var _ store.Censuses = (*tx)(nil)

// censusThreadsSQL classifies every thread in one statement. Its
// parameters: the retry timer kind, the sleep timer kind, the auth key
// prefix, the local toolset, then the moving states and the pending call
// states. The recursive part marks the threads with a busy descendant.
// It is wrapped in a SELECT so that a reader transaction accepts it.
const censusThreadsSQL = `SELECT * FROM (
WITH RECURSIVE own AS (
	SELECT t.id AS id, COALESCE(t.parent_id, '') AS parent_id,
		CASE WHEN t.status = 'closed' THEN 1 ELSE 0 END AS closed,
		CASE WHEN t.status <> 'closed' AND EXISTS (SELECT 1 FROM session_moves m WHERE m.root_id = t.root_id AND m.direction = 'out' AND m.state IN (?5, ?6)) THEN 1 ELSE 0 END AS moving,
		CASE WHEN t.status <> 'closed' AND EXISTS (SELECT 1 FROM inbox i WHERE i.thread_id = t.id) THEN 1 ELSE 0 END AS queued,
		CASE WHEN t.status <> 'closed' AND EXISTS (SELECT 1 FROM timers m WHERE m.thread_id = t.id AND m.kind = ?1) THEN 1 ELSE 0 END AS retrying,
		CASE WHEN t.status <> 'closed' AND (EXISTS (SELECT 1 FROM choices c WHERE c.thread_id = t.id)
			OR EXISTS (SELECT 1 FROM calls c JOIN seen_keys k ON k.key = ?3 || c.thread_id || ':' || c.call_id
				WHERE c.thread_id = t.id AND c.state IN (?7, ?8) AND c.toolset <> ?4)) THEN 1 ELSE 0 END AS asking,
		CASE WHEN t.status <> 'closed' AND ((SELECT COUNT(*) FROM calls c WHERE c.thread_id = t.id AND c.state IN (?7, ?8))
				> (SELECT COUNT(*) FROM timers m WHERE m.thread_id = t.id AND m.kind = ?2)
			OR EXISTS (SELECT 1 FROM subscriptions s WHERE s.thread_id = t.id AND s.state = 'active')) THEN 1 ELSE 0 END AS tools,
		CASE WHEN t.status <> 'closed' AND EXISTS (SELECT 1 FROM timers m WHERE m.thread_id = t.id AND m.kind = ?2) THEN 1 ELSE 0 END AS sleeping
	FROM threads t
),
busy(id) AS (
	SELECT parent_id FROM own
	WHERE closed = 0 AND parent_id <> '' AND ((queued = 1 AND retrying = 0) OR asking = 1 OR tools = 1 OR sleeping = 1)
	UNION
	SELECT o.parent_id FROM own o JOIN busy b ON o.id = b.id WHERE o.closed = 0 AND o.parent_id <> ''
)
SELECT closed, moving, queued, retrying, asking, tools, sleeping,
	CASE WHEN closed = 0 AND id IN (SELECT id FROM busy) THEN 1 ELSE 0 END AS busy_below, COUNT(*) AS n
FROM own GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
) AS census`

// Census implements store.Censuses.
func (t *tx) Census(q store.CensusQuery) (store.Census, error) {
	out := store.Census{Open: map[store.ThreadFacts]int64{}}
	rows, err := t.tx.Query(censusThreadsSQL, q.RetryTimerKind, q.SleepTimerKind, q.AuthKeyPrefix, q.LocalToolset,
		string(store.MoveLeaving), string(store.MoveSending), string(store.CallNew), string(store.CallDispatched))
	if err != nil {
		return out, fmt.Errorf("count threads by state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var closed, moving, queued, retrying, asking, tools, sleeping, busy bool
		var n int64
		if err := rows.Scan(&closed, &moving, &queued, &retrying, &asking, &tools, &sleeping, &busy, &n); err != nil {
			return out, fmt.Errorf("count threads by state: %w", err)
		}
		if closed {
			out.Closed += n
			continue
		}
		out.Open[store.ThreadFacts{Moving: moving, Queued: queued, Retrying: retrying, Asking: asking, Tools: tools,
			Sleeping: sleeping, BusyBelow: busy}] += n
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("count threads by state: %w", err)
	}
	if len(q.Ages) == 0 {
		return out, nil
	}
	// Pending calls and the threads that have one, by age: one column pair
	// per age.
	var b strings.Builder
	b.WriteString("SELECT ")
	args := make([]any, 0, 2*len(q.Ages)+3)
	for i, age := range q.Ages {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "COALESCE(SUM(CASE WHEN created <= ?%d THEN 1 ELSE 0 END), 0), COUNT(DISTINCT CASE WHEN created <= ?%d THEN thread_id END)", i+1, i+1)
		args = append(args, nanos(q.Now.Add(-age)))
	}
	n := len(q.Ages)
	fmt.Fprintf(&b, " FROM calls WHERE state IN (?%d, ?%d) AND toolset <> ?%d", n+1, n+2, n+3)
	args = append(args, string(store.CallNew), string(store.CallDispatched), q.LocalToolset)
	out.PendingCalls, out.WaitingThreads = make([]int64, n), make([]int64, n)
	dest := make([]any, 0, 2*n)
	for i := range n {
		dest = append(dest, &out.PendingCalls[i], &out.WaitingThreads[i])
	}
	if err := t.tx.QueryRow(b.String(), args...).Scan(dest...); err != nil {
		return out, fmt.Errorf("count pending calls by age: %w", err)
	}
	return out, nil
}
