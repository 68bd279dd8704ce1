// Package storetest is the conformance suite of store.Store: the behaviour
// every runtime store (the embedded SQLite one, a shared PostgreSQL one)
// must have, as documented in package runtime/store.
//
// An implementation runs it from one test, with a function that opens a
// fresh, empty store for each subtest:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mystore.Open(...) // a new empty database
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// open must return an empty store of its own each time (for a database
// server: a new database or schema per call); Run closes it when the
// subtest ends. Subtests run one after the other, are deterministic and
// take well under a second each on SQLite; each names the part of the
// contract it checks (see the doc comment of its function), so a failure
// reads as the broken promise. The subtests of shared.go check what
// several processes on one database rely on; its claim subtests skip a
// store whose transactions do not implement store.Leases.
//
// Beyond the letter of package store's doc comments, the suite holds a
// store to what the engine relies on: a View reads one consistent
// snapshot (an Update committed while it runs does not change what it
// reads: REPEATABLE READ or stronger on PostgreSQL), a write inside View
// fails, concurrent read-modify-write Updates lose nothing (Update retries
// serialization failures itself), and a failed lookup (ErrNotFound) leaves
// the transaction usable.
//
// Times: the suite writes times on whole microseconds (a PostgreSQL
// timestamp's precision) in UTC and compares them with time.Time.Equal.
// JSON payloads (arguments, inbox payloads, view contents, manifests) are
// compared as JSON values, not as bytes, except where the contract counts
// payload bytes (HeldEventStats), where the stored bytes must be the ones
// written, and in StoredRecordsReadBack, whose compact documents must read
// back byte for byte.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// Opener opens a new, empty store for one subtest. It reports failures with
// t.Fatal; Run closes the store when the subtest ends.
type Opener func(t *testing.T) store.Store

// Run runs the whole conformance suite, one subtest per part of the
// contract, each on a fresh store from open.
func Run(t *testing.T, open Opener) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close the store: %v", err)
				}
			})
			c.fn(t, s)
		})
	}
}

// cases lists the subtests in the order Run runs them.
var cases = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Threads", testThreads},
	{"ThreadsPage", testThreadsPage},
	{"UserThreadsPage", testUserThreadsPage},
	{"ChildThreads", testChildThreads},
	{"ThreadTitles", testThreadTitles},
	{"FindThreads", testFindThreads},
	{"Messages", testMessages},
	{"InheritedHistory", testInheritedHistory},
	{"AwkwardText", testAwkwardText},
	{"StoredRecordsReadBack", testStoredRecordsReadBack},
	{"Inbox", testInbox},
	{"InboxDedupKeys", testInboxDedupKeys},
	{"InboxOnce", testInboxOnce},
	{"Calls", testCalls},
	{"PendingStates", testPendingStates},
	{"OldestPendingCalls", testOldestPendingCalls},
	{"Subscriptions", testSubscriptions},
	{"Views", testViews},
	{"Timers", testTimers},
	{"ToolsetCache", testToolsetCache},
	{"ToolsetTrust", testToolsetTrust},
	{"Choices", testChoices},
	{"HeldEvents", testHeldEvents},
	{"CallChecks", testCallChecks},
	{"UncheckedCalls", testUncheckedCalls},
	{"NotFound", testNotFound},
	{"UpdateAtomicity", testUpdateAtomicity},
	{"UpdateSeesOwnWrites", testUpdateSeesOwnWrites},
	{"ViewIsolation", testViewIsolation},
	{"ViewIsReadOnly", testViewIsReadOnly},
	{"ConcurrentUpdates", testConcurrentUpdates},
	{"Closed", testClosed},
	{"ConsumeConsumedFails", testConsumeConsumedFails},
	{"ConcurrentConsumeOneWins", testConcurrentConsumeOneWins},
	{"ThreadClaims", testThreadClaims},
	{"TimerClaims", testTimerClaims},
	{"ThreadEventIDs", testThreadEventIDs},
	{"OAuthLinks", testOAuthLinks},
	{"SharedCallbackKey", testSharedCallbackKey},
	{"Sessions", testSessions},
	{"Moves", testMoves},
	{"Compactions", testCompactions},
	{"Census", testCensus},
	{"WaitLists", testWaitLists},
}

// testClosed: after Close, Update, View and QuickView fail with
// store.ErrClosed without running their function, and a second Close
// reports nothing.
func testClosed(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "t1", Status: store.ThreadActive, Created: base})
	})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ran := func(store.Tx) error { t.Error("a function ran after Close"); return nil }
	for name, call := range map[string]func(context.Context, func(store.Tx) error) error{
		"Update": s.Update, "View": s.View, "QuickView": s.QuickView,
	} {
		if err := call(context.Background(), ran); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// base is the suite's clock: a fixed time on a whole microsecond.
var base = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

// at returns base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

func update(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// createThreads creates root threads with the given ids, each one
// microsecond after the previous.
func createThreads(t *testing.T, s store.Store, ids ...string) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		for i, id := range ids {
			if err := tx.CreateThread(store.Thread{ID: id, Status: store.ThreadActive, Created: at(time.Duration(i) * time.Microsecond)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(a, b []byte) bool {
	if len(bytes.TrimSpace(a)) == 0 || len(bytes.TrimSpace(b)) == 0 {
		return len(bytes.TrimSpace(a)) == len(bytes.TrimSpace(b))
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return bytes.Equal(ca, cb)
}

// wantNotFound fails unless err wraps store.ErrNotFound.
func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: got error %v, want one wrapping store.ErrNotFound", what, err)
	}
}

// threadIDs returns the ids of ths.
func threadIDs(ths []store.Thread) []string {
	out := make([]string, len(ths))
	for i, th := range ths {
		out[i] = th.ID
	}
	return out
}

// ctx returns the context the suite's calls run in.
func ctx() context.Context { return context.Background() }
