package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// The subtests below check what several `rap serve` processes sharing one
// database rely on: a batch is consumed by one transaction only, thread and
// timer claims, per-thread event ids, one callback key and oauth links any
// process can read. Every store meets them, SQLite included, but for the
// claims: those run only on a store whose transactions implement
// store.Leases (a store several processes share).

// leases returns tx's lease methods; requireLeases has checked the store
// has them.
func leases(tx store.Tx) store.Leases { return tx.(store.Leases) }

// requireLeases skips t unless s's transactions implement store.Leases.
func requireLeases(t *testing.T, s store.Store) {
	t.Helper()
	var ok bool
	view(t, s, func(tx store.Tx) error {
		_, ok = tx.(store.Leases)
		return nil
	})
	if !ok {
		t.Skip("the store's transactions do not implement store.Leases: one process holds it")
	}
}

// consumeBatch enqueues two items for thread th and returns their ids as a
// slice's batch, read before its write transaction as the engine does.
func consumeBatch(t *testing.T, s store.Store, th string) []int64 {
	t.Helper()
	createThreads(t, s, th)
	enqueue(t, s,
		item(th, th+"-1", store.KindUserMessage, `{"text":"one"}`),
		item(th, th+"-2", store.KindUserMessage, `{"text":"two"}`))
	q := queued(t, s, th)
	return []int64{q[0].ID, q[1].ID}
}

// slice consumes batch and appends the turn it produced, as one slice of
// the engine does in one Update.
func slice(s store.Store, th string, batch []int64, text string) error {
	return s.Update(ctx(), func(tx store.Tx) error {
		if err := tx.Consume(batch); err != nil {
			return err
		}
		_, err := tx.AppendMessages(th, []store.Message{{Role: store.RoleAssistant, Text: text}})
		return err
	})
}

// testConsumeConsumedFails: consuming an inbox batch another slice already
// consumed fails the transaction instead of succeeding silently, so its
// turn is not written twice.
func testConsumeConsumedFails(t *testing.T, s store.Store) {
	batch := consumeBatch(t, s, "a")
	if err := slice(s, "a", batch, "first"); err != nil {
		t.Fatalf("the first slice: %v", err)
	}
	if err := slice(s, "a", batch, "second"); !errors.Is(err, store.ErrConsumed) {
		t.Errorf("a second slice consuming the same batch returned %v; want an error wrapping store.ErrConsumed", err)
	}
	view(t, s, func(tx store.Tx) error {
		if h, err := tx.History("a"); err != nil || len(h) != 1 || h[0].Text != "first" {
			t.Errorf("History after two slices on one batch = %+v, %v; want the first slice's turn only", h, err)
		}
		return nil
	})
}

// testConcurrentConsumeOneWins: two slices that read the same batch and
// commit at the same time: exactly one commits.
func testConcurrentConsumeOneWins(t *testing.T, s store.Store) {
	batch := consumeBatch(t, s, "a")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = slice(s, "a", batch, "slice") })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Errorf("two slices on one batch returned %v and %v; want exactly one error", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, store.ErrConsumed) {
			t.Errorf("the losing slice returned %v; want an error wrapping store.ErrConsumed", err)
		}
	}
	view(t, s, func(tx store.Tx) error {
		if h, err := tx.History("a"); err != nil || len(h) != 1 {
			t.Errorf("History after two concurrent slices on one batch has %d messages (%v); want 1", len(h), err)
		}
		return nil
	})
}

// testThreadClaims: a process claims a thread with a lease it renews; a
// second claim fails while the lease lives and succeeds once it expired;
// a released lease is free at once.
func testThreadClaims(t *testing.T, s store.Store) {
	requireLeases(t, s)
	createThreads(t, s, "a", "b")
	claim := func(th, owner string, now, until time.Duration) bool {
		t.Helper()
		var ok bool
		update(t, s, func(tx store.Tx) error {
			var err error
			ok, err = leases(tx).ClaimThread(th, owner, at(now), at(until))
			return err
		})
		return ok
	}
	lease := func(th string) (string, time.Time, error) {
		var owner string
		var until time.Time
		var err error
		view(t, s, func(tx store.Tx) error {
			owner, until, err = leases(tx).ThreadLease(th)
			return nil
		})
		return owner, until, err
	}
	if _, _, err := lease("a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ThreadLease of an unclaimed thread: %v, want ErrNotFound", err)
	}
	if !claim("a", "p1", 0, 10*time.Second) {
		t.Fatal("the first claim of a free thread failed")
	}
	if owner, until, err := lease("a"); err != nil || owner != "p1" || !until.Equal(at(10*time.Second)) {
		t.Errorf("ThreadLease = %q, %v, %v; want p1 until +10s", owner, until, err)
	}
	if claim("a", "p2", 5*time.Second, 15*time.Second) {
		t.Error("a second owner claimed a thread whose lease lives")
	}
	if !claim("b", "p2", 5*time.Second, 15*time.Second) {
		t.Error("a claim of another thread failed")
	}
	// Renewal by the owner.
	if !claim("a", "p1", 9*time.Second, 20*time.Second) {
		t.Fatal("the owner could not renew its lease")
	}
	if claim("a", "p2", 15*time.Second, 25*time.Second) {
		t.Error("a second owner claimed a thread whose renewed lease lives")
	}
	// Expiry: the owner died.
	if !claim("a", "p2", 20*time.Second, 30*time.Second) {
		t.Error("a second owner could not claim a thread whose lease expired")
	}
	if owner, _, _ := lease("a"); owner != "p2" {
		t.Errorf("after the takeover the lease is %q's, want p2's", owner)
	}
	// Release: only by the owner.
	update(t, s, func(tx store.Tx) error { return leases(tx).ReleaseThread("a", "p1") })
	if owner, _, _ := lease("a"); owner != "p2" {
		t.Errorf("a release by a former owner ended p2's lease (now %q)", owner)
	}
	update(t, s, func(tx store.Tx) error { return leases(tx).ReleaseThread("a", "p2") })
	if _, _, err := lease("a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ThreadLease after release: %v, want ErrNotFound", err)
	}
	if !claim("a", "p3", 21*time.Second, 31*time.Second) {
		t.Error("a released thread could not be claimed at once")
	}
	update(t, s, func(tx store.Tx) error { return leases(tx).ReleaseThread("ghost", "p3") })

	// Concurrent claims of one free thread: exactly one wins.
	createThreads(t, s, "race")
	const n = 6
	var wg sync.WaitGroup
	won := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			err := s.Update(ctx(), func(tx store.Tx) error {
				var err error
				won[i], err = leases(tx).ClaimThread("race", fmt.Sprintf("p%d", i), at(0), at(time.Minute))
				return err
			})
			if err != nil {
				t.Errorf("concurrent claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if c := count(won); c != 1 {
		t.Errorf("%d of %d concurrent claims of one thread won; want exactly 1", c, n)
	}
}

// count returns how many of bs are true.
func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// testTimerClaims: a due timer is claimed by exactly one of several
// concurrent claimers; the claim expires, so another fires a timer whose
// claimer died; a timer put again is free; an unknown timer cannot be
// claimed.
func testTimerClaims(t *testing.T, s store.Store) {
	requireLeases(t, s)
	createThreads(t, s, "a")
	update(t, s, func(tx store.Tx) error {
		return tx.PutTimer(store.Timer{ID: "t1", ThreadID: "a", Kind: "sleep", Due: at(time.Second)})
	})
	claimTimer := func(id, owner string, now, until time.Duration) (bool, error) {
		var ok bool
		err := s.Update(ctx(), func(tx store.Tx) error {
			var err error
			ok, err = leases(tx).ClaimTimer(id, owner, at(now), at(until))
			return err
		})
		return ok, err
	}
	const n = 6
	var wg sync.WaitGroup
	won := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			var err error
			if won[i], err = claimTimer("t1", fmt.Sprintf("p%d", i), 2*time.Second, 32*time.Second); err != nil {
				t.Errorf("concurrent timer claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if c := count(won); c != 1 {
		t.Fatalf("%d of %d concurrent claims of one due timer won; want exactly 1", c, n)
	}
	winner := fmt.Sprintf("p%d", slices.Index(won, true))
	if ok, _ := claimTimer("t1", "late", 10*time.Second, 40*time.Second); ok {
		t.Error("a claim of a timer whose claim lives succeeded")
	}
	if ok, _ := claimTimer("t1", winner, 10*time.Second, 40*time.Second); !ok {
		t.Error("the claimer could not renew its claim")
	}
	if ok, _ := claimTimer("t1", "heir", 41*time.Second, time.Minute); !ok {
		t.Error("a timer whose claim expired could not be claimed by another")
	}
	// The timer is rescheduled: its claim goes.
	update(t, s, func(tx store.Tx) error {
		return tx.PutTimer(store.Timer{ID: "t1", ThreadID: "a", Kind: "sleep", Due: at(time.Hour)})
	})
	if ok, _ := claimTimer("t1", "next", 42*time.Second, time.Minute); !ok {
		t.Error("a timer put again after its claim could not be claimed")
	}
	// Fired: deleted, nothing to claim.
	update(t, s, func(tx store.Tx) error { return tx.DeleteTimer("t1") })
	if ok, err := claimTimer("t1", "p9", time.Hour, 2*time.Hour); ok || err != nil {
		t.Errorf("a claim of a deleted timer = %v, %v; want false, nil", ok, err)
	}
	view(t, s, func(tx store.Tx) error {
		if due, err := tx.DueTimers(at(2 * time.Hour)); err != nil || len(due) != 0 {
			t.Errorf("DueTimers after the claimed timer was deleted = %+v, %v", due, err)
		}
		return nil
	})
}

// testThreadEventIDs: every client event of a thread gets an id that
// increases per thread, readable after a given id (Last-Event-ID).
func testThreadEventIDs(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	ev := func(th, typ, data string, seq int64) store.ThreadEvent {
		return store.ThreadEvent{ThreadID: th, Type: typ, Data: json.RawMessage(data), MsgSeq: seq}
	}
	appendEvents := func(evs ...store.ThreadEvent) []store.ThreadEvent {
		t.Helper()
		var out []store.ThreadEvent
		update(t, s, func(tx store.Tx) error {
			var err error
			out, err = tx.AppendThreadEvents(evs)
			return err
		})
		return out
	}
	after := func(th string, id int64, limit int) []store.ThreadEvent {
		t.Helper()
		var out []store.ThreadEvent
		view(t, s, func(tx store.Tx) error {
			var err error
			out, err = tx.ThreadEventsAfter(th, id, limit)
			return err
		})
		return out
	}
	last := func(th string) int64 {
		t.Helper()
		var id int64
		view(t, s, func(tx store.Tx) error {
			var err error
			id, err = tx.LastThreadEventID(th)
			return err
		})
		return id
	}
	ids := func(evs []store.ThreadEvent) []int64 {
		var out []int64
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	if id := last("a"); id != 0 {
		t.Errorf("LastThreadEventID of a thread without events = %d, want 0", id)
	}
	withZero := `{"text":"x\u0000y"}`
	got := appendEvents(ev("a", "message", withZero, 3), ev("b", "status", `{}`, 0), ev("a", "tool_call", `{}`, 3))
	if want := []int64{1, 1, 2}; !slices.Equal(ids(got), want) {
		t.Errorf("ids of a first append over two threads = %v, want %v (numbered per thread)", ids(got), want)
	}
	got = appendEvents(ev("a", "status", `{"status":"idle"}`, 0))
	if want := []int64{3}; !slices.Equal(ids(got), want) {
		t.Errorf("ids of a second append = %v, want %v", ids(got), want)
	}
	all := after("a", 0, 100)
	if !slices.Equal(ids(all), []int64{1, 2, 3}) || all[0].Type != "message" || !jsonEqual(all[0].Data, json.RawMessage(withZero)) ||
		all[0].MsgSeq != 3 || all[1].Type != "tool_call" || all[2].MsgSeq != 0 || all[0].Created.IsZero() {
		t.Errorf("ThreadEventsAfter(a, 0) = %+v; want events 1 to 3 as appended", all)
	}
	if e := after("a", 1, 1); !slices.Equal(ids(e), []int64{2}) {
		t.Errorf("ThreadEventsAfter(a, 1, limit 1) ids = %v, want [2]", ids(e))
	}
	if e := after("a", 3, 10); len(e) != 0 {
		t.Errorf("ThreadEventsAfter(a, last) = %+v, want none", e)
	}
	if id := last("a"); id != 3 {
		t.Errorf("LastThreadEventID(a) = %d, want 3", id)
	}

	// Concurrent appends to one thread: every id once, no gap.
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := s.Update(ctx(), func(tx store.Tx) error {
				_, err := tx.AppendThreadEvents([]store.ThreadEvent{ev("b", "status", `{}`, 0), ev("b", "usage", `{}`, 0)})
				return err
			}); err != nil {
				t.Errorf("concurrent append: %v", err)
			}
		})
	}
	wg.Wait()
	if e := after("b", 0, 100); len(e) != 1+2*n || e[len(e)-1].ID != 1+2*n {
		t.Errorf("after %d concurrent appends of 2 events, thread b has ids %v; want 1 to %d", n, ids(e), 1+2*n)
	}

	// Pruning by count keeps the newest; by age drops the old; the last
	// id stays.
	var pruned int64
	update(t, s, func(tx store.Tx) error {
		var err error
		pruned, err = tx.PruneThreadEvents(at(-time.Hour), 2)
		return err
	})
	if e := after("a", 0, 100); !slices.Equal(ids(e), []int64{2, 3}) {
		t.Errorf("after pruning to 2 per thread, thread a keeps ids %v, want [2 3]", ids(e))
	}
	if want := int64(1 + 2*n - 1); pruned != want {
		t.Errorf("PruneThreadEvents deleted %d, want %d", pruned, want)
	}
	update(t, s, func(tx store.Tx) error {
		_, err := tx.PruneThreadEvents(time.Now().Add(time.Hour), 100)
		return err
	})
	if e := after("a", 0, 100); len(e) != 0 {
		t.Errorf("after pruning by age, thread a keeps %+v, want none", e)
	}
	if id := last("a"); id != 3 {
		t.Errorf("LastThreadEventID(a) after pruning = %d, want 3 (pruning never lowers it)", id)
	}
	if got := appendEvents(ev("a", "status", `{}`, 0)); !slices.Equal(ids(got), []int64{4}) {
		t.Errorf("an append after pruning got ids %v, want [4]", ids(got))
	}
}

// testSharedCallbackKey: the callback HMAC key (and the previous one
// during rotation) is kept in the store, the same for every process: the
// first key stored wins, rotation keeps the old key with its grace time.
func testSharedCallbackKey(t *testing.T, s store.Store) {
	view(t, s, func(tx store.Tx) error {
		_, err := tx.CallbackKeys()
		wantNotFound(t, "CallbackKeys of a new store", err)
		return nil
	})
	// Processes starting together each propose a key; all get one.
	const n = 4
	var wg sync.WaitGroup
	got := make([]store.CallbackKeys, n)
	for i := range n {
		wg.Go(func() {
			err := s.Update(ctx(), func(tx store.Tx) error {
				var err error
				got[i], err = tx.InitCallbackKey([]byte(fmt.Sprintf("key-of-process-%d-0123456789", i)))
				return err
			})
			if err != nil {
				t.Errorf("InitCallbackKey %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		if !bytes.Equal(got[i].Current, got[0].Current) || len(got[i].Current) == 0 {
			t.Fatalf("concurrent InitCallbackKey calls got different keys: %q and %q", got[0].Current, got[i].Current)
		}
	}
	first := got[0].Current
	withZero := []byte("second\x00key\xff\xfe-0123456789")
	update(t, s, func(tx store.Tx) error { return tx.RotateCallbackKey(withZero, at(time.Hour)) })
	view(t, s, func(tx store.Tx) error {
		k, err := tx.CallbackKeys()
		if err != nil || !bytes.Equal(k.Current, withZero) || !bytes.Equal(k.Previous, first) || !k.PreviousUntil.Equal(at(time.Hour)) {
			t.Errorf("CallbackKeys after rotation = %q, %q, %v, %v; want the new key byte for byte, the first as previous until +1h", k.Current, k.Previous, k.PreviousUntil, err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		k, err := tx.InitCallbackKey([]byte("too-late-0123456789"))
		if err != nil || !bytes.Equal(k.Current, withZero) {
			t.Errorf("InitCallbackKey after a key was stored = %q, %v; want the stored key kept", k.Current, err)
		}
		return err
	})
}

// testOAuthLinks: an oauth link is kept for the thread, readable by any
// process, until it expires or is deleted.
func testOAuthLinks(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	ev := json.RawMessage(`{"call_id":"c1","name":"gh","auth_url":"https://auth.example/x?state=` + "s\\u0000" + `"}`)
	update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.PutOAuthLink(store.OAuthLink{ThreadID: "a", CallID: "c1", Event: ev, Created: at(0), Expires: at(time.Minute)}),
			tx.PutOAuthLink(store.OAuthLink{ThreadID: "a", CallID: "c2", Event: json.RawMessage(`{}`), Created: at(time.Second), Expires: at(10 * time.Second)}),
			tx.PutOAuthLink(store.OAuthLink{ThreadID: "b", CallID: "c1", Event: json.RawMessage(`{}`), Created: at(0), Expires: at(time.Minute)}))
	})
	links := func(th string, now time.Duration) []store.OAuthLink {
		var out []store.OAuthLink
		view(t, s, func(tx store.Tx) error {
			var err error
			out, err = tx.ThreadOAuthLinks(th, at(now))
			return err
		})
		return out
	}
	if l := links("a", 0); len(l) != 2 || l[0].CallID != "c1" || !jsonEqual(l[0].Event, ev) || !l[0].Expires.Equal(at(time.Minute)) || l[1].CallID != "c2" {
		t.Errorf("ThreadOAuthLinks(a) = %+v; want c1 (its event as written) then c2", l)
	}
	if l := links("a", 20*time.Second); len(l) != 1 || l[0].CallID != "c1" {
		t.Errorf("ThreadOAuthLinks(a) after c2 expired = %+v; want c1 only", l)
	}
	var deleted int64
	update(t, s, func(tx store.Tx) error {
		var err error
		deleted, err = tx.DeleteExpiredOAuthLinks(at(20 * time.Second))
		return err
	})
	if deleted != 1 {
		t.Errorf("DeleteExpiredOAuthLinks deleted %d, want 1", deleted)
	}
	update(t, s, func(tx store.Tx) error { return tx.DeleteOAuthLink("a", "c1") })
	update(t, s, func(tx store.Tx) error { return tx.DeleteOAuthLink("a", "ghost") })
	if l := links("a", 0); len(l) != 0 {
		t.Errorf("ThreadOAuthLinks(a) after deletion = %+v; want none", l)
	}
	if l := links("b", 0); len(l) != 1 {
		t.Errorf("ThreadOAuthLinks(b) = %+v; another thread's deletion took its link", l)
	}
}
