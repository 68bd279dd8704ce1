package runtime

// This file owns the claims of threads taken in the transaction that
// commits an input for them, on a shared store (the shared side of
// coord.inputClaim): a tool's result received by this process wakes its
// thread here, whose worker would claim the thread's lease in a
// transaction of its own right after. Instead the result's transaction
// claims it when nobody else holds it, and the worker takes that claim
// (claimThread) without a commit.
//
// The claim is good only while no release of the lease by this process
// could have come after it. Releases are few (a worker that hands its
// thread back, a slice's last commit) and each one moves the thread's
// release count before its transaction starts and after it ended (odd
// while one runs). A claim is kept with the count read before its
// transaction started, and taken only while the count is still that (and
// even): a release that ran at any time since then changed it, and the
// worker claims the thread in a transaction of its own, as without this.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// inputClaim is a claim of a thread taken in the transaction that commits
// an input for it (coord.inputClaim).
type inputClaim interface {
	// take claims the thread in tx for this process, when no other
	// process holds it.
	take(tx store.Tx) error
	// committed keeps the claim, if take took it, for the thread's next
	// worker in this process; call it once tx committed.
	committed()
}

// noInputClaim is the inputClaim of a store one process holds: nothing to
// claim.
type noInputClaim struct{}

func (noInputClaim) take(store.Tx) error { return nil }
func (noInputClaim) committed()          {}

// releaseCounts are the release counts of threads, by a hash of the
// thread's id: threads sharing a count only make a kept claim unusable
// more often.
type releaseCounts struct {
	n [256]atomic.Uint64
}

func (rc *releaseCounts) of(threadID string) *atomic.Uint64 {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(threadID); i++ {
		h = (h ^ uint32(threadID[i])) * 16777619
	}
	return &rc.n[h%uint32(len(rc.n))]
}

// inputClaims are the claims kept for the threads' next workers.
type inputClaims struct {
	counts releaseCounts
	mu     sync.Mutex
	kept   map[string]keptClaim
}

// keptClaim is a claim taken at sent, with the thread's release count
// before its transaction started.
type keptClaim struct {
	sent  time.Time
	count uint64
}

// releasing marks the start of a release of the thread's lease by this
// process, and forgets a claim kept for it; released marks its end.
func (ic *inputClaims) releasing(threadID string) {
	ic.counts.of(threadID).Add(1)
	ic.mu.Lock()
	delete(ic.kept, threadID)
	ic.mu.Unlock()
}

func (ic *inputClaims) released(threadID string) { ic.counts.of(threadID).Add(1) }

// takeKept returns the claim kept for the thread, if it is still good,
// and forgets it.
func (ic *inputClaims) takeKept(threadID string) (keptClaim, bool) {
	ic.mu.Lock()
	k, ok := ic.kept[threadID]
	delete(ic.kept, threadID)
	ic.mu.Unlock()
	return k, ok && ic.counts.of(threadID).Load() == k.count
}

// sharedInputClaim is the inputClaim of a runtime on a shared store.
type sharedInputClaim struct {
	s        *sharedCoord
	threadID string
	count    uint64
	sent     time.Time
	taken    bool
}

// inputClaim returns the claim of the thread to take in the transaction
// that commits an input for it.
func (s *sharedCoord) inputClaim(threadID string) inputClaim {
	return &sharedInputClaim{s: s, threadID: threadID, count: s.claims.counts.of(threadID).Load()}
}

// take claims the thread unless another process holds it, or a release
// of it by this process was under way when the claim began.
func (c *sharedInputClaim) take(tx store.Tx) error {
	c.taken = false
	if c.count%2 == 1 || c.s.r.moves.paused(c.threadID) {
		return nil
	}
	r := c.s.r
	r.mu.Lock()
	stopping := r.stopping
	r.mu.Unlock()
	if stopping {
		return nil // nothing wakes the thread here: another process takes it
	}
	l, err := leasesOf(tx)
	if err != nil {
		return err
	}
	now := time.Now()
	ok, err := l.ClaimThread(c.threadID, c.s.owner, now, now.Add(c.s.ttl))
	c.taken, c.sent = ok, now
	return err
}

// committed keeps the claim for the thread's next worker.
func (c *sharedInputClaim) committed() {
	if !c.taken {
		return
	}
	ic := &c.s.claims
	ic.mu.Lock()
	if ic.kept == nil {
		ic.kept = map[string]keptClaim{}
	}
	ic.kept[c.threadID] = keptClaim{sent: c.sent, count: c.count}
	ic.mu.Unlock()
}
