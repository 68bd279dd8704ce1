package sqlite

import (
	"context"
	"errors"
	"testing"

	"github.com/gorap/gorap/runtime/store"
)

// TestRowCacheFollowsCommitsOnly: the writer's cache of thread rows and
// last seqs (issue 11 item 4) shows what was committed, never what a
// rolled-back transaction wrote, and what a committed one did.
func TestRowCacheFollowsCommitsOnly(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	update := func(fn func(store.Tx) error) error { return s.Update(ctx, fn) }
	status := func() store.ThreadStatus {
		t.Helper()
		var th store.Thread
		if err := s.QuickView(ctx, func(tx store.Tx) (err error) { th, err = tx.Thread("t1"); return err }); err != nil {
			t.Fatal(err)
		}
		return th.Status
	}
	if err := update(func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "t1", Status: store.ThreadActive})
	}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != store.ThreadActive {
		t.Fatalf("status %q; want active", got)
	}
	boom := errors.New("boom")
	// A rolled-back status change and append leave no trace.
	if err := update(func(tx store.Tx) error {
		if err := tx.SetThreadStatus("t1", store.ThreadClosed); err != nil {
			return err
		}
		if th, err := tx.Thread("t1"); err != nil || th.Status != store.ThreadClosed {
			t.Errorf("in the transaction: Thread = %+v, %v; want it closed", th, err)
		}
		if _, err := tx.AppendMessages("t1", []store.Message{{Role: store.RoleUser, Text: "lost"}}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v; want boom", err)
	}
	if got := status(); got != store.ThreadActive {
		t.Errorf("after a rollback: status %q; want active", got)
	}
	var seqs []int64
	if err := update(func(tx store.Tx) error {
		msgs, err := tx.AppendMessages("t1", []store.Message{{Role: store.RoleUser, Text: "a"}, {Role: store.RoleUser, Text: "b"}})
		for _, m := range msgs {
			seqs = append(seqs, m.Seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Errorf("seqs after a rolled-back append: %v; want [1 2]", seqs)
	}
	// A committed change is seen by the next transactions.
	if err := update(func(tx store.Tx) error { return tx.SetThreadStatus("t1", store.ThreadClosed) }); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != store.ThreadClosed {
		t.Errorf("after a commit: status %q; want closed", got)
	}
	if err := update(func(tx store.Tx) error {
		msgs, err := tx.AppendMessages("t1", []store.Message{{Role: store.RoleUser, Text: "c"}})
		if err == nil && msgs[0].Seq != 3 {
			t.Errorf("next seq %d; want 3", msgs[0].Seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var h []store.Message
	if err := s.View(ctx, func(tx store.Tx) (err error) { h, err = tx.History("t1"); return err }); err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h[2].Text != "c" {
		t.Errorf("history %+v; want a, b, c", h)
	}
	// HistorySince answers from the cached last seq when nothing is newer.
	for after, want := range map[int64]int{3: 0, 7: 0, 2: 1, 0: 3} {
		var got []store.Message
		if err := s.QuickView(ctx, func(tx store.Tx) (err error) { got, err = tx.HistorySince("t1", after); return err }); err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Errorf("HistorySince(t1, %d) = %d messages; want %d", after, len(got), want)
		}
	}
}
