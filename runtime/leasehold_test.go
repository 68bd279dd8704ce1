package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newTestHold returns a hold of a 10 s lease claimed at the clock's now
// (margin 2 s: lost from 8 s on), and a counter of its onLost calls.
func newTestHold(t *testing.T, c *fakeClock) (*leaseHold, *int) {
	t.Helper()
	var lostCalls int
	h := newLeaseHold(context.Background(), "th", 10*time.Second, c.now, c.now(), func(error) { lostCalls++ })
	t.Cleanup(h.stop)
	return h, &lostCalls
}

// TestLeaseHoldLostFromExpiryMinusMarginOnTheClock: a hold whose lease
// was claimed at T for ttl counts as lost from T + ttl − margin on, read
// from the clock at the moment of the check — with no renewal tried and
// no timer fired (as after SIGSTOP/SIGCONT) — and its context is then
// cancelled with errLeaseLost.
func TestLeaseHoldLostFromExpiryMinusMarginOnTheClock(t *testing.T) {
	c := &fakeClock{t: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	h, lostCalls := newTestHold(t, c)
	if margin := leaseMargin(10 * time.Second); margin != 2*time.Second {
		t.Fatalf("margin of a 10 s lease = %v, want 2 s", margin)
	}
	c.add(8*time.Second - time.Nanosecond)
	if err := h.Err(); err != nil {
		t.Fatalf("1 ns before expiry − margin: Err = %v, want held", err)
	}
	if h.ctx.Err() != nil {
		t.Fatalf("context cancelled while held: %v", context.Cause(h.ctx))
	}
	c.add(time.Nanosecond)
	err := h.Err()
	if !errors.Is(err, errLeaseLost) {
		t.Fatalf("at expiry − margin: Err = %v, want errLeaseLost", err)
	}
	if !errors.Is(context.Cause(h.ctx), errLeaseLost) {
		t.Fatalf("the hold's context after the loss: cause %v, want errLeaseLost", context.Cause(h.ctx))
	}
	if *lostCalls != 1 {
		t.Fatalf("onLost called %d times, want once", *lostCalls)
	}
	// Lost stays lost, even if the clock went back or a renewal succeeds.
	c.add(-5 * time.Second)
	h.renewed(c.now(), c.now(), true, nil)
	if err := h.Err(); !errors.Is(err, errLeaseLost) {
		t.Fatalf("after a renewal following the loss: Err = %v, want still lost", err)
	}
	if *lostCalls != 1 {
		t.Fatalf("onLost called %d times, want once", *lostCalls)
	}
}

// TestLeaseHoldRenewals: a renewal answered before the deadline extends
// the hold from the time it was sent; one answered after the deadline
// ends it (it may have reached the store after the lease lapsed); a
// renewal that found the lease taken ends it; a failed renewal changes
// nothing, so the clock decides.
func TestLeaseHoldRenewals(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

	t.Run("in time extends from the sending", func(t *testing.T) {
		c := &fakeClock{t: t0}
		h, _ := newTestHold(t, c)
		c.add(3 * time.Second)
		sent := c.now()
		c.add(time.Second) // the store took a second to answer
		h.renewed(sent, c.now(), true, nil)
		c.add(7*time.Second - time.Nanosecond) // sent + 10 s − 2 s − 1 ns
		if err := h.Err(); err != nil {
			t.Fatalf("before the renewed deadline: %v", err)
		}
		c.add(time.Nanosecond)
		if err := h.Err(); !errors.Is(err, errLeaseLost) {
			t.Fatalf("at the renewed deadline: Err = %v, want lost", err)
		}
	})
	t.Run("answered too late ends it", func(t *testing.T) {
		c := &fakeClock{t: t0}
		h, _ := newTestHold(t, c)
		sent := t0.Add(3 * time.Second)
		h.renewed(sent, t0.Add(8*time.Second), true, nil)
		c.add(4 * time.Second)
		if err := h.Err(); !errors.Is(err, errLeaseLost) {
			t.Fatalf("after a renewal answered at the deadline: Err = %v, want lost", err)
		}
	})
	t.Run("taken ends it", func(t *testing.T) {
		c := &fakeClock{t: t0}
		h, _ := newTestHold(t, c)
		h.renewed(t0, t0, false, nil)
		if err := h.Err(); !errors.Is(err, errLeaseLost) {
			t.Fatalf("after a renewal found the lease taken: Err = %v, want lost", err)
		}
	})
	t.Run("failed leaves the clock to decide", func(t *testing.T) {
		c := &fakeClock{t: t0}
		h, _ := newTestHold(t, c)
		c.add(3 * time.Second)
		h.renewed(c.now(), c.now(), false, errors.New("connection refused"))
		if err := h.Err(); err != nil {
			t.Fatalf("after a failed renewal, before the deadline: %v", err)
		}
		c.add(5 * time.Second)
		if err := h.Err(); !errors.Is(err, errLeaseLost) {
			t.Fatalf("after a failed renewal, at the deadline: Err = %v, want lost", err)
		}
	})
}

// TestLeaseHoldTimerCutsContext: without any check, the hold's context is
// cancelled (errLeaseLost) once the deadline passes on the real clock, so
// a completion streaming under it is cut.
func TestLeaseHoldTimerCutsContext(t *testing.T) {
	h := newLeaseHold(context.Background(), "th", 250*time.Millisecond, time.Now, time.Now(), nil)
	defer h.stop()
	select {
	case <-h.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the hold's context was not cancelled 10 s after its deadline")
	}
	if !errors.Is(context.Cause(h.ctx), errLeaseLost) {
		t.Fatalf("cause %v, want errLeaseLost", context.Cause(h.ctx))
	}
}

// TestLeaseHoldEndedIsNotLost: a hold the worker ended is no longer held,
// but it is not reported lost (no "lost the lease" warning after a
// thread was handed back), even once its deadline passes.
func TestLeaseHoldEndedIsNotLost(t *testing.T) {
	c := &fakeClock{t: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	h, lostCalls := newTestHold(t, c)
	h.stop()
	c.add(time.Minute)
	if err := h.Err(); !errors.Is(err, errHoldEnded) {
		t.Fatalf("Err after the hold ended = %v, want errHoldEnded", err)
	}
	h.renewed(c.now(), c.now(), false, nil)
	if *lostCalls != 0 {
		t.Fatalf("onLost called %d times after the hold ended, want never", *lostCalls)
	}
}
