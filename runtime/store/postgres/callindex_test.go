package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// rawConn opens a plain connection to the schema of u (pgtest.URL).
func rawConn(t testing.TB, u string) *pgx.Conn {
	t.Helper()
	pc, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(context.Background(), pc.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestPendingCallQueriesUseThePartialIndexes: every query for pending
// calls can find them through an index that holds only pending calls
// (migration 4) rather than by scanning the calls table, which keeps every
// call ever made, even in the generic plan PostgreSQL reuses for a
// prepared statement, where a parameter's value is unknown. (Sequential
// scans are disabled for the check: on an empty table the planner would
// rightly prefer one.)
func TestPendingCallQueriesUseThePartialIndexes(t *testing.T) {
	u := pgtest.URL(t)
	s, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn := rawConn(t, u)
	ctx := context.Background()
	for _, set := range []string{`SET plan_cache_mode = force_generic_plan`, `SET enable_seqscan = off`} {
		if _, err := conn.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	for q, args := range postgres.PendingCallQueries {
		i++
		name := fmt.Sprintf("pending_%d", i)
		if _, err := conn.Exec(ctx, `PREPARE `+name+` AS `+q); err != nil {
			t.Fatalf("prepare %q: %v", q, err)
		}
		exec := `EXPLAIN EXECUTE ` + name
		if args != "" {
			exec += `(` + args + `)`
		}
		rows, err := conn.Query(ctx, exec)
		if err != nil {
			t.Fatalf("%s: %v", exec, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, "calls_pending") || strings.Contains(plan, "Seq Scan on calls") {
			t.Errorf("query %q\ngeneric plan:\n%s\nwant it to search a calls_pending index", q, plan)
		}
	}
}

// TestMigrationToPartialCallIndexes: a database at schema version 3 with
// calls in every state is upgraded in place: the two indexes on a call's
// state are replaced by the partial ones, and the queries for pending and
// other calls find the same calls as before.
func TestMigrationToPartialCallIndexes(t *testing.T) {
	u := pgtest.URL(t)
	conn := rawConn(t, u)
	ctx := context.Background()
	versionThree(t, conn)
	for _, q := range []string{
		`INSERT INTO threads (id, root_id, status, created) VALUES ('t', 't', 'active', now())`,
		`INSERT INTO calls (thread_id, call_id, tool_name, arguments, toolset, endpoint, turn_seq, state, deadline, created, updated) VALUES
			('t', 'new', 'x', '{}', 's', 'e', 1, 'new', now() - interval '1 hour', now(), now()),
			('t', 'sent', 'x', '{}', 's', 'e', 1, 'dispatched', NULL, now(), now() - interval '1 hour'),
			('t', 'done', 'x', '{}', 's', 'e', 1, 'done', now() - interval '1 hour', now(), now()),
			('t', 'gone', 'x', '{}', 's', 'e', 1, 'cancelled', NULL, now(), now())`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatalf("Open of a version 3 database: %v", err)
	}
	defer s.Close()
	rows, err := conn.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'calls' AND schemaname = current_schema() ORDER BY indexname`)
	if err != nil {
		t.Fatal(err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"calls_pending", "calls_pending_created", "calls_pending_thread", "calls_pkey"}; !slices.Equal(indexes, want) {
		t.Errorf("indexes on calls after the upgrade = %v, want %v", indexes, want)
	}
	ids := func(cs []store.Call) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.CallID)
		}
		slices.Sort(out)
		return out
	}
	err = s.View(ctx, func(tx store.Tx) error {
		checks := []struct {
			what string
			get  func() ([]store.Call, error)
			want []string
		}{
			{"PendingCalls", func() ([]store.Call, error) { return tx.PendingCalls("t") }, []string{"new", "sent"}},
			{"CallsInState(dispatched)", func() ([]store.Call, error) { return tx.CallsInState(store.CallDispatched) }, []string{"sent"}},
			{"CallsInState(done)", func() ([]store.Call, error) { return tx.CallsInState(store.CallDone) }, []string{"done"}},
			{"CallsInState(cancelled)", func() ([]store.Call, error) { return tx.CallsInState(store.CallCancelled) }, []string{"gone"}},
			{"DueCalls", func() ([]store.Call, error) { return tx.DueCalls(time.Now()) }, []string{"new"}},
		}
		for _, c := range checks {
			got, err := c.get()
			if err != nil {
				return fmt.Errorf("%s: %w", c.what, err)
			}
			if !slices.Equal(ids(got), c.want) {
				t.Errorf("%s after the upgrade = %v, want %v", c.what, ids(got), c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// versionThree brings conn's schema to version 3, before migration 4.
func versionThree(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	for i, m := range postgres.Migrations[:3] {
		if _, err := conn.Exec(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO schema_version (version) VALUES (3)`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// BenchmarkMigrationToPartialCallIndexes times the first Open of a
// database at schema version 3 holding a million calls on 10,000 threads
// (one in a thousand dispatched, the rest done): migration 4 drops the two
// indexes on a call's state and builds the partial ones.
func BenchmarkMigrationToPartialCallIndexes(b *testing.B) {
	const calls, threads = 1_000_000, 10_000
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		u := pgtest.URL(b)
		conn := rawConn(b, u)
		versionThree(b, conn)
		for _, q := range []string{
			`INSERT INTO threads (id, root_id, status, created)
				SELECT format('thread-%s', i), format('thread-%s', i), 'active', now() FROM generate_series(0, ` + fmt.Sprint(threads-1) + `) i`,
			`INSERT INTO calls (thread_id, call_id, tool_name, arguments, toolset, endpoint, turn_seq, state, deadline, created, updated)
				SELECT format('thread-%s', i % ` + fmt.Sprint(threads) + `), format('call_%s', i), 'work', '{}', 'bench', 'http://127.0.0.1:1/invoke', i,
					CASE WHEN i % 1000 = 0 THEN 'dispatched' ELSE 'done' END, now(), now(), now()
				FROM generate_series(0, ` + fmt.Sprint(calls-1) + `) i`,
			`VACUUM ANALYZE calls`,
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		s, err := postgres.Open(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
