package bench

import (
	"context"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// The cycle loop runs on PostgreSQL too (rap bench-runtime
// --store postgres://…), and every result is delivered.
func TestRunCyclesPostgres(t *testing.T) {
	u := pgtest.URL(t)
	rep, err := RunCycles(context.Background(), CycleOptions{Threads: 4, Duration: time.Second, Warmup: 300 * time.Millisecond, DataDir: t.TempDir(), Store: u})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cycles == 0 || rep.Failures != 0 {
		t.Errorf("on PostgreSQL: %d cycles, %d results not delivered:\n%s", rep.Cycles, rep.Failures, rep)
	}
	if rep.PostgresTx.Commits == 0 || rep.PostgresTx.Views == 0 {
		t.Errorf("no transactions counted on PostgreSQL: %+v", rep.PostgresTx)
	}
	t.Logf("\n%s", rep)
}

// Hibernating threads on PostgreSQL: created, some woken, and a restarted
// runtime serves them all.
func TestRunIdlePostgres(t *testing.T) {
	u := pgtest.URL(t)
	rep, err := RunIdle(context.Background(), IdleOptions{Threads: 600, Pending: 60, Batch: 200, Wake: 5, DataDir: t.TempDir(), Store: u})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PendingCalls != 60 || rep.Woken != 5 || rep.RestartTime <= 0 {
		t.Errorf("implausible report:\n%s", rep)
	}
	t.Logf("\n%s", rep)
}
