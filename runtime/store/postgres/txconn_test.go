package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// TestTransactionIncludesItsFirstStatement: BEGIN travels with a
// transaction's first statement, and that statement is inside the
// transaction whatever kind it is (a write, a one-row read, a many-row
// read, a batch of events): when the function then fails, nothing it
// wrote is stored.
func TestTransactionIncludesItsFirstStatement(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	boom := errors.New("boom")
	firsts := map[string]func(tx store.Tx) error{
		"write": func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "first-write"}) },
		"one-row read": func(tx store.Tx) error {
			_, err := tx.Thread("no-such-thread")
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return tx.CreateThread(store.Thread{ID: "first-row"})
		},
		"many-row read": func(tx store.Tx) error {
			if _, err := tx.ListThreads(); err != nil {
				return err
			}
			return tx.CreateThread(store.Thread{ID: "first-rows"})
		},
	}
	for name, first := range firsts {
		err := s.Update(ctx, func(tx store.Tx) error {
			if err := first(tx); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("%s: Update returned %v, want the function's error", name, err)
		}
	}
	err := s.View(ctx, func(tx store.Tx) error {
		ths, err := tx.ListThreads()
		if err != nil {
			return err
		}
		if len(ths) != 0 {
			t.Errorf("threads stored by failed transactions: %v", ths)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestViewIsOneSnapshotFromItsFirstRead: a view sees the database as it
// was at its first read, also when another transaction commits between
// two of its reads.
func TestViewIsOneSnapshotFromItsFirstRead(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "a"}) }); err != nil {
		t.Fatal(err)
	}
	err := s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.Thread("a"); err != nil {
			return err
		}
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "b"}) }); err != nil {
			return err
		}
		if _, err := tx.Thread("b"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the view saw a thread committed after its first read (err %v)", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCommitAfterSwallowedStatementErrorFails: when a statement fails and
// the function returns nil anyway, the commit reports that the database
// rolled the transaction back, and nothing of it is stored.
func TestCommitAfterSwallowedStatementErrorFails(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "dup"}) }); err != nil {
		t.Fatal(err)
	}
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "fresh"}); err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: "dup"}); err == nil {
			t.Error("creating a thread twice did not fail")
		}
		return nil
	})
	if err == nil {
		t.Fatal("commit of a transaction with a failed statement succeeded")
	}
	s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.Thread("fresh"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a thread of the rolled-back transaction was stored (err %v)", err)
		}
		return nil
	})
}

// TestConnectionsComeBackToThePool: transactions that run no statement,
// fail, or end normally all give their connection back, so many more of
// them than the pool holds run one after another.
func TestConnectionsComeBackToThePool(t *testing.T) {
	s := pgtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 200 {
		var err error
		switch i % 4 {
		case 0:
			err = s.View(ctx, func(store.Tx) error { return nil })
		case 1:
			err = s.Update(ctx, func(store.Tx) error { return nil })
		case 2:
			err = s.Update(ctx, func(tx store.Tx) error {
				tx.Thread("missing")
				return errors.New("fails")
			})
			if err != nil && err.Error() == "fails" {
				err = nil
			}
		case 3:
			err = s.View(ctx, func(tx store.Tx) error { _, err := tx.ListThreads(); return err })
		}
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
}

// TestReadOneSeesEachCommit: ReadOne runs its reads outside a
// transaction, each seeing what was committed when it started, and gives
// its connection back each time.
func TestReadOneSeesEachCommit(t *testing.T) {
	s := pgtest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.ReadOne(ctx, func(tx store.Tx) error {
		if _, err := tx.Thread("late"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a thread not created yet: %v, want not found", err)
		}
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "late"}) }); err != nil {
			return err
		}
		_, err := tx.Thread("late")
		return err
	})
	if err != nil {
		t.Fatalf("the second read did not see the thread committed after the first: %v", err)
	}
	for i := range 100 {
		if err := s.ReadOne(ctx, func(tx store.Tx) error { _, err := tx.Thread("late"); return err }); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
}
