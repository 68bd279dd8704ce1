package runtime

// This file owns lingerPool, the goroutine pool that runs slice workers
// and dispatches.

import (
	"context"
	"sync"
	"time"
)

// lingerPool runs functions on goroutines that, after each function, wait
// a short while for the next one before they exit. Under load most calls
// find a goroutine waiting, which saves starting one and growing its stack
// again (the store and HTTP code need deep stacks); when the runtime is
// idle none is left after the linger time, so idle threads and calls hold
// no goroutine (RAP RT-2).
type lingerPool struct {
	idle   chan func() // unbuffered: only a waiting goroutine takes a function
	linger time.Duration
	ctx    context.Context // lingering goroutines exit when it is done
	wg     *sync.WaitGroup // counts the pool's goroutines
}

func newLingerPool(ctx context.Context, wg *sync.WaitGroup, linger time.Duration) *lingerPool {
	return &lingerPool{idle: make(chan func()), linger: linger, ctx: ctx, wg: wg}
}

// Go runs fn on a waiting goroutine, or on a new one if none waits.
func (p *lingerPool) Go(fn func()) {
	select {
	case p.idle <- fn:
	default:
		p.wg.Add(1)
		go p.run(fn)
	}
}

func (p *lingerPool) run(fn func()) {
	defer p.wg.Done()
	var t *time.Timer // one per goroutine, reset after each function
	for {
		fn()
		if t == nil {
			t = time.NewTimer(p.linger)
		} else {
			t.Reset(p.linger) // stopped or fired, and no stale tick (Go 1.23 timers)
		}
		select {
		case fn = <-p.idle:
			t.Stop()
		case <-t.C:
			return
		case <-p.ctx.Done():
			t.Stop()
			return
		}
	}
}
