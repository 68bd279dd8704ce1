package bench

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/rap"
)

// A result the runtime refuses is counted once, not retried, and the
// report says why: the call, the thread and the runtime's answer.
func TestFailureSaysWhy(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		http.Error(w, "this call is already settled", http.StatusConflict)
	}))
	defer srv.Close()
	l := newLoopTool(true, 1)
	l.sendResult(&rap.Invocation{GroupID: "thread-7", ID: "call-3", CallbackURL: srv.URL}, false)
	if got := l.failures.Load(); got != 1 {
		t.Fatalf("failures = %d, want 1", got)
	}
	if got := posts.Load(); got != 1 {
		t.Errorf("the result was posted %d times; a 4xx answer must not be retried", got)
	}
	why := l.firstFailure()
	for _, want := range []string{"call-3", "thread-7", "409", "already settled"} {
		if !strings.Contains(why, want) {
			t.Errorf("first failure %q does not name %q", why, want)
		}
	}
	l.addFailure("a later one")
	if l.firstFailure() != why {
		t.Errorf("a later failure replaced the first: %q", l.firstFailure())
	}
	rep := CycleReport{Failures: 2, FirstFailure: why}
	if !strings.Contains(rep.String(), "first failure "+why) {
		t.Errorf("the report does not show the first failure:\n%s", rep.String())
	}
}

// A result still on its way when the run ends is not posted and not a
// failure: a run that stopped after its last cycle reported one now and
// then ("the run ended before the first attempt").
func TestResultAfterTheEndIsNoFailure(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	defer srv.Close()
	l := newLoopTool(true, 1)
	l.stop()
	l.sendResult(&rap.Invocation{GroupID: "thread-7", ID: "call-3", CallbackURL: srv.URL}, true)
	if got := l.failures.Load(); got != 0 {
		t.Errorf("failures = %d (%s), want 0", got, l.firstFailure())
	}
	if got := posts.Load(); got != 0 {
		t.Errorf("the result was posted %d times after the run ended", got)
	}
}

// The peer process answers "why" with its first failure, quoted, so that
// the parent's report can say it.
func TestPeerSaysWhy(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ServePeer(context.Background(), PeerOptions{}, inR, outW); outW.Close() }()
	out := bufio.NewReader(outR)
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("the peer ended before it was ready: %v", err)
		}
		if strings.TrimSpace(line) == "ready" {
			break
		}
	}
	ask := func(req string) string {
		t.Helper()
		io.WriteString(inW, req+"\n")
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", req, err)
		}
		return strings.TrimSpace(line)
	}
	if got := ask("why"); got != `why ""` {
		t.Errorf("before any failure: %q, want %q", got, `why ""`)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Errorf("ServePeer: %v", err)
	}
}
