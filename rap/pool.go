package rap

import (
	"context"
	"sync"
)

// pool runs invocation jobs on a fixed number of worker goroutines behind a
// bounded queue. A slot is reserved before the invocation is acknowledged,
// so the acknowledgement is never sent for work that has nowhere to run, and
// handing the job over after the acknowledgement never blocks.
type pool struct {
	workers  int
	capacity int      // workers + queue: the most jobs outstanding at once
	jobs     chan job // buffered to capacity, so a reserved submit never blocks

	mu          sync.Mutex
	idle        *sync.Cond // signalled when outstanding drops to zero
	outstanding int        // reserved slots: jobs queued, running or about to be submitted
	started     bool
	closed      bool
	workersDone sync.WaitGroup
}

// newPool returns a pool of workers goroutines with room for queue waiting
// jobs. The workers start with the first submitted job.
func newPool(workers, queue int) *pool {
	p := &pool{
		workers:  workers,
		capacity: workers + queue,
		jobs:     make(chan job, workers+queue),
	}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// reserve takes a slot without blocking. It reports false when the pool is
// saturated or closed; the caller then refuses the invocation.
func (p *pool) reserve() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.outstanding >= p.capacity {
		return false
	}
	p.outstanding++
	return true
}

// release gives back a slot.
func (p *pool) release() {
	p.mu.Lock()
	p.outstanding--
	if p.outstanding == 0 {
		p.idle.Broadcast()
	}
	p.mu.Unlock()
}

// job is one accepted invocation, passed to a worker by value so that the
// hand-off allocates nothing.
type job struct {
	s       *Server
	ctx     context.Context
	cancel  context.CancelCauseFunc
	c       *Call
	invalid error
}

func (j *job) run() { j.s.runCall(j.ctx, j.cancel, j.c, j.invalid) }

// submit hands a job to the workers. The caller must hold a slot from
// reserve; the slot is released when the job returns. The job must not
// panic (the server recovers inside every job).
func (p *pool) submit(j job) {
	p.mu.Lock()
	if !p.started {
		p.started = true
		p.workersDone.Add(p.workers)
		for range p.workers {
			go p.work()
		}
	}
	p.mu.Unlock()
	// jobs is still open: close waits for every reserved slot first, and
	// the buffer holds capacity jobs, so this send never blocks.
	p.jobs <- j
}

func (p *pool) work() {
	defer p.workersDone.Done()
	for j := range p.jobs {
		j.run()
		p.release()
	}
}

// close stops accepting reservations, waits until every reserved job has
// run, and stops the workers.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.workersDone.Wait()
		return
	}
	p.closed = true
	for p.outstanding > 0 {
		p.idle.Wait()
	}
	close(p.jobs)
	p.mu.Unlock()
	p.workersDone.Wait()
}

// inFlight reports how many slots are reserved.
func (p *pool) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outstanding
}
