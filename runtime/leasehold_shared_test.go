package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// blockingModel blocks its first completion until its context ends, and
// answers the later ones at once.
type blockingModel struct {
	mu      sync.Mutex
	calls   int
	started chan struct{} // closed when the first completion began
	cut     chan error    // gets the cause that ended the first completion
}

func (m *blockingModel) Name() string         { return "blocking" }
func (m *blockingModel) SupportsImages() bool { return false }

func (m *blockingModel) Complete(ctx context.Context, _ model.Request, _ model.Stream) (*model.Response, error) {
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	if n > 1 {
		return &model.Response{Text: "answered after the lease came back"}, nil
	}
	close(m.started)
	<-ctx.Done()
	m.cut <- context.Cause(ctx)
	return nil, ctx.Err()
}

func (m *blockingModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// TestSharedStoreLeaseTakenCutsCompletion: on a shared store, when a
// renewal finds the thread's lease taken by another process, the
// completion streaming under it is cut at once (its context ends with
// errLeaseLost), nothing of it is saved, and the process asks the model
// nothing more for the thread while the other holds it; once the other
// hands the lease back the sweep takes the thread again and answers the
// input, which stayed queued.
func TestSharedStoreLeaseTakenCutsCompletion(t *testing.T) {
	u := pgtest.URL(t)
	m := &blockingModel{started: make(chan struct{}), cut: make(chan error, 1)}
	e := newEnv(t, envOptions{pgURL: u, model: m, tweak: func(c *Config) {
		c.LeaseTTL = 1500 * time.Millisecond
		c.SweepEvery = 100 * time.Millisecond
	}})
	th := e.newThread()
	e.post(th, "hello?")
	select {
	case <-m.started:
	case <-time.After(30 * time.Second):
		t.Fatal("no completion began within 30s")
	}
	ctx := context.Background()
	// Another process takes the lease (as if this one had stalled past it).
	if err := e.rt.store.Update(ctx, func(tx store.Tx) error {
		owner, _, err := leases(tx).ThreadLease(th)
		if err != nil {
			return err
		}
		if err := leases(tx).ReleaseThread(th, owner); err != nil {
			return err
		}
		now := time.Now()
		ok, err := leases(tx).ClaimThread(th, "other-process", now, now.Add(time.Hour))
		if err == nil && !ok {
			err = errors.New("the other process's claim failed")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-m.cut:
		if !errors.Is(cause, errLeaseLost) {
			t.Fatalf("the completion was cut with cause %v, want errLeaseLost", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the completion was not cut within 30s of the lease being taken")
	}
	// The worker leaves the thread to the other process: no new request,
	// nothing saved, the input still queued.
	poll(t, "the worker to leave the thread", func() bool {
		e.rt.mu.Lock()
		defer e.rt.mu.Unlock()
		return e.rt.threads[th] == nil
	})
	if n := m.count(); n != 1 {
		t.Fatalf("the model was asked %d times, want once: the process asked again for a thread another held", n)
	}
	if h := e.history(th); len(h) != 0 {
		t.Fatalf("history after the cut completion: %+v, want empty (the input stays queued)", h)
	}
	// The other process hands the thread back: this one answers it.
	if err := e.rt.store.Update(ctx, func(tx store.Tx) error { return leases(tx).ReleaseThread(th, "other-process") }); err != nil {
		t.Fatal(err)
	}
	e.waitHistory(th, "the answer once the lease came back", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "answered after the lease came back")
	})
	if n := m.count(); n != 2 {
		t.Fatalf("the model was asked %d times, want twice (the cut completion, then the answer)", n)
	}
}
