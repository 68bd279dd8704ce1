package runtime

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// failFirst is a model whose first completion fails; later ones answer
// with the scripted turns.
type failFirst struct {
	model.Provider
	calls atomic.Int32
}

func (f *failFirst) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if f.calls.Add(1) == 1 {
		return nil, errors.New("the model is down for a moment")
	}
	return f.Provider.Complete(ctx, req, s)
}

// TestSharedStoreNotifyWakesHolder (LISTEN/NOTIFY
// wake-ups): runtime B holds a thread whose slice failed (it keeps the
// lease until it expires, an hour here, and the sweep runs once an hour).
// A message accepted by runtime A cannot take the thread; B hears of it
// through PostgreSQL's NOTIFY and answers it at once, as a new message
// retries a failed thread on one process (RAP RT-4). Without the
// notification the message would wait for the lease to expire.
func TestSharedStoreNotifyWakesHolder(t *testing.T) {
	u := pgtest.URL(t)
	long := func(c *Config) {
		c.LeaseTTL, c.SweepEvery = time.Hour, time.Hour
		c.ModelRetry = ModelRetryPolicy{Attempts: 1}
	}
	b := newEnv(t, envOptions{pgURL: u, model: &failFirst{Provider: scripted.New([]scripted.Turn{{Text: "answered by B", Repeat: true}})}, tweak: long})
	a := newEnv(t, envOptions{pgURL: u, turns: []scripted.Turn{{Text: "answered by A", Repeat: true}}, tweak: long})
	th := b.newThread()
	b.post(th, "first")
	poll(t, "B's slice to fail and keep the thread", func() bool {
		b.rt.mu.Lock()
		defer b.rt.mu.Unlock()
		return b.rt.failed[th] != nil && b.rt.threads[th] == nil
	})
	var owner string
	if err := a.rt.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		owner, _, err = leases(tx).ThreadLease(th)
		return err
	}); err != nil || owner != b.rt.coord.(*sharedCoord).owner {
		t.Fatalf("after the failed slice the lease is %q (%v), want B's %q", owner, err, b.rt.coord.(*sharedCoord).owner)
	}
	start := time.Now()
	a.post(th, "second")
	h := a.waitHistory(th, "B's answer to the message A accepted", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "answered by B") })
	t.Logf("answered %v after A accepted the message", time.Since(start))
	if hasText(h, store.RoleAssistant, "answered by A") {
		t.Errorf("A answered a thread B holds:\n%s", dump(h))
	}
}

// lateInputStore is a PostgreSQL store that, once armed, commits a user
// message (through the runtime, which wakes the thread) right after the
// first read it serves once the thread is answered and its lease handed
// back: the look at the inbox a worker takes after releasing the thread.
type lateInputStore struct {
	*postgres.Store
	e      *env
	thread string
	armed  atomic.Bool
}

func (s *lateInputStore) View(ctx context.Context, fn func(store.Tx) error) error {
	err := s.Store.View(ctx, fn)
	if s.armed.Load() {
		var lease error
		var h []store.Message
		s.Store.View(ctx, func(tx store.Tx) error {
			_, _, lease = leases(tx).ThreadLease(s.thread)
			h, _ = tx.History(s.thread)
			return nil
		})
		answered := len(h) > 0 && h[len(h)-1].Role == store.RoleAssistant
		if answered && errors.Is(lease, store.ErrNotFound) && s.armed.CompareAndSwap(true, false) {
			if err := s.e.rt.PostMessage(context.Background(), s.thread, "late"); err != nil {
				s.e.t.Error(err)
			}
		}
	}
	return err
}

// TestSharedStoreWakeAfterLastLook: a message committed
// (and its wake-up delivered) after the worker handed the thread back and
// found its inbox empty, but before the worker exits, is not lost: the
// worker takes the thread again. Without that the message would wait for
// the sweep (an hour here).
func TestSharedStoreWakeAfterLastLook(t *testing.T) {
	var spy *lateInputStore
	e := newEnv(t, envOptions{postgres: true, turns: []scripted.Turn{{Text: "ok", Repeat: true}},
		tweak: func(c *Config) { c.SweepEvery = time.Hour },
		wrapStore: func(s store.Store) store.Store {
			spy = &lateInputStore{Store: s.(*postgres.Store)}
			return spy
		}})
	th := e.newThread()
	spy.e, spy.thread = e, th
	spy.armed.Store(true)
	e.post(th, "first")
	e.waitHistory(th, "the answer to the late message", func(h []store.Message) bool {
		return len(h) >= 4 && hasText(h, store.RoleUser, "late") && h[len(h)-1].Role == store.RoleAssistant
	})
}
