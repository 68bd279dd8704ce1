package runtime

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// The pool runs every function, reuses a goroutine that waits, and leaves
// no goroutine behind once it has been idle for the linger time or its
// context is done.
func TestLingerPool(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	p := newLingerPool(ctx, &wg, 200*time.Millisecond)
	done := make(chan int, 100)
	for i := 0; i < 100; i++ {
		p.Go(func() { done <- i })
		<-done // one at a time: the goroutine that ran it is waiting again
	}
	if n := runtime.NumGoroutine() - before; n > 2 {
		t.Fatalf("%d goroutines for 100 sequential functions, want the same one reused", n)
	}
	// Concurrent functions each get a goroutine.
	var running sync.WaitGroup
	release := make(chan struct{})
	for i := 0; i < 10; i++ {
		running.Add(1)
		p.Go(func() { running.Done(); <-release })
	}
	running.Wait()
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still there after the linger time", runtime.NumGoroutine()-before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A done context ends a waiting goroutine at once.
	p.Go(func() {})
	cancel()
	wg.Wait()
}
