package runtime

import (
	"testing"
	"time"
)

// TestInputClaimKeptOnlyWithoutReleaseSince: a claim taken with an input
// is used by the thread's next worker only when no release of the thread
// by this process ran since the claim's transaction began, and only once.
func TestInputClaimKeptOnlyWithoutReleaseSince(t *testing.T) {
	s := &sharedCoord{}
	commit := func(c inputClaim) {
		sc := c.(*sharedInputClaim)
		sc.taken, sc.sent = true, time.Now() // as take does when it claimed
		sc.committed()
	}

	commit(s.inputClaim("t"))
	if _, ok := s.claims.takeKept("t"); !ok {
		t.Fatal("a claim with no release since is not used")
	}
	if _, ok := s.claims.takeKept("t"); ok {
		t.Fatal("a kept claim is used twice")
	}

	c := s.inputClaim("t")
	s.claims.releasing("t")
	s.claims.released("t")
	commit(c)
	if _, ok := s.claims.takeKept("t"); ok {
		t.Fatal("a claim is used although a release ran after its transaction began")
	}

	c = s.inputClaim("t")
	commit(c)
	s.claims.releasing("t") // the worker's release, after the claim
	if _, ok := s.claims.takeKept("t"); ok {
		t.Fatal("a claim is used although a release began after it")
	}
	s.claims.released("t")

	s.claims.releasing("t")
	c = s.inputClaim("t")
	if err := c.take(nil); err != nil || c.(*sharedInputClaim).taken {
		t.Fatalf("a claim begun while a release runs was taken (err %v)", err)
	}
	s.claims.released("t")
}
