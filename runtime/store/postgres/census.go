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
// states. Each table is read once and grouped by thread (no table is
// searched per thread: timers have no index by thread), then joined to
// the threads; the recursive part marks the threads with a busy
// descendant.
const censusThreadsSQL = `WITH RECURSIVE
tm AS (SELECT thread_id, bool_or(kind = $1) AS retrying, COUNT(*) FILTER (WHERE kind = $2) AS sleeps
	FROM timers GROUP BY thread_id),
pc AS (SELECT thread_id, COUNT(*) AS n FROM calls WHERE state IN ($7, $8) GROUP BY thread_id),
au AS (SELECT DISTINCT c.thread_id FROM calls c JOIN seen_keys k ON k.key = convert_to($3::text || c.thread_id || ':' || c.call_id, 'UTF8')
	WHERE c.state IN ($7, $8) AND c.toolset <> $4),
ch AS (SELECT DISTINCT thread_id FROM choices),
sb AS (SELECT DISTINCT thread_id FROM subscriptions WHERE state = 'active'),
ib AS (SELECT DISTINCT thread_id FROM inbox),
mv AS (SELECT DISTINCT root_id FROM session_moves WHERE direction = 'out' AND state IN ($5, $6)),
own AS (
	SELECT t.id AS id, COALESCE(t.parent_id, '') AS parent_id,
		t.status = 'closed' AS closed,
		(t.status <> 'closed' AND mv.root_id IS NOT NULL) AS moving,
		(t.status <> 'closed' AND ib.thread_id IS NOT NULL) AS queued,
		(t.status <> 'closed' AND COALESCE(tm.retrying, false)) AS retrying,
		(t.status <> 'closed' AND (ch.thread_id IS NOT NULL OR au.thread_id IS NOT NULL)) AS asking,
		(t.status <> 'closed' AND (COALESCE(pc.n, 0) > COALESCE(tm.sleeps, 0) OR sb.thread_id IS NOT NULL)) AS tools,
		(t.status <> 'closed' AND COALESCE(tm.sleeps, 0) > 0) AS sleeping
	FROM threads t
	LEFT JOIN tm ON tm.thread_id = t.id
	LEFT JOIN pc ON pc.thread_id = t.id
	LEFT JOIN au ON au.thread_id = t.id
	LEFT JOIN ch ON ch.thread_id = t.id
	LEFT JOIN sb ON sb.thread_id = t.id
	LEFT JOIN ib ON ib.thread_id = t.id
	LEFT JOIN mv ON mv.root_id = t.root_id
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
