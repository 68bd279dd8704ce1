package postgres

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
const censusThreadsSQL = `WITH RECURSIVE own AS (
	SELECT t.id AS id, COALESCE(t.parent_id, '') AS parent_id,
		t.status = 'closed' AS closed,
		(t.status <> 'closed' AND EXISTS (SELECT 1 FROM session_moves m WHERE m.root_id = t.root_id AND m.direction = 'out' AND m.state IN ($5, $6))) AS moving,
		(t.status <> 'closed' AND EXISTS (SELECT 1 FROM inbox i WHERE i.thread_id = t.id)) AS queued,
		(t.status <> 'closed' AND EXISTS (SELECT 1 FROM timers m WHERE m.thread_id = t.id AND m.kind = $1)) AS retrying,
		(t.status <> 'closed' AND (EXISTS (SELECT 1 FROM choices c WHERE c.thread_id = t.id)
			OR EXISTS (SELECT 1 FROM calls c JOIN seen_keys k ON k.key = convert_to($3::text || c.thread_id || ':' || c.call_id, 'UTF8')
				WHERE c.thread_id = t.id AND c.state IN ($7, $8) AND c.toolset <> $4))) AS asking,
		(t.status <> 'closed' AND ((SELECT COUNT(*) FROM calls c WHERE c.thread_id = t.id AND c.state IN ($7, $8))
				> (SELECT COUNT(*) FROM timers m WHERE m.thread_id = t.id AND m.kind = $2)
			OR EXISTS (SELECT 1 FROM subscriptions s WHERE s.thread_id = t.id AND s.state = 'active'))) AS tools,
		(t.status <> 'closed' AND EXISTS (SELECT 1 FROM timers m WHERE m.thread_id = t.id AND m.kind = $2)) AS sleeping
	FROM threads t
),
busy(id) AS (
	SELECT parent_id FROM own
	WHERE NOT closed AND parent_id <> '' AND ((queued AND NOT retrying) OR asking OR tools OR sleeping)
	UNION
	SELECT o.parent_id FROM own o JOIN busy b ON o.id = b.id WHERE NOT o.closed AND o.parent_id <> ''
)
SELECT closed, moving, queued, retrying, asking, tools, sleeping,
	(NOT closed AND id IN (SELECT id FROM busy)) AS busy_below, COUNT(*) AS n
FROM own GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`

// Census implements store.Censuses.
func (t *tx) Census(q store.CensusQuery) (store.Census, error) {
	out := store.Census{Open: map[store.ThreadFacts]int64{}}
	rows, err := t.query(censusThreadsSQL, q.RetryTimerKind, q.SleepTimerKind, q.AuthKeyPrefix, q.LocalToolset,
		string(store.MoveLeaving), string(store.MoveSending), string(store.CallNew), string(store.CallDispatched))
	if err != nil {
		return out, fmt.Errorf("count threads by state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var closed, moving, queued, retrying, asking, tools, sleeping, busy bool
		var n int64
		if err := rows.Scan(&closed, &moving, &queued, &retrying, &asking, &tools, &sleeping, &busy, &n); err != nil {
			return out, fmt.Errorf("count threads by state: %w", t.note(err))
		}
		if closed {
			out.Closed += n
			continue
		}
		out.Open[store.ThreadFacts{Moving: moving, Queued: queued, Retrying: retrying, Asking: asking, Tools: tools,
			Sleeping: sleeping, BusyBelow: busy}] += n
	}
	if err := t.note(rows.Err()); err != nil {
		return out, fmt.Errorf("count threads by state: %w", err)
	}
	if len(q.Ages) == 0 {
		return out, nil
	}
	// Pending calls and the threads that have one, by age: one column pair
	// per age.
	var b strings.Builder
	b.WriteString("SELECT ")
	args := make([]any, 0, len(q.Ages)+3)
	for i, age := range q.Ages {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "COUNT(*) FILTER (WHERE created <= $%d), COUNT(DISTINCT thread_id) FILTER (WHERE created <= $%d)", i+1, i+1)
		args = append(args, q.Now.Add(-age))
	}
	n := len(q.Ages)
	fmt.Fprintf(&b, " FROM calls WHERE state IN ($%d, $%d) AND toolset <> $%d", n+1, n+2, n+3)
	args = append(args, string(store.CallNew), string(store.CallDispatched), q.LocalToolset)
	out.PendingCalls, out.WaitingThreads = make([]int64, n), make([]int64, n)
	dest := make([]any, 0, 2*n)
	for i := range n {
		dest = append(dest, &out.PendingCalls[i], &out.WaitingThreads[i])
	}
	if err := t.queryRow(b.String(), args...).Scan(dest...); err != nil {
		return out, fmt.Errorf("count pending calls by age: %w", err)
	}
	return out, nil
}
