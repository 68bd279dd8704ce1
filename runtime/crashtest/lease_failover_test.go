package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// The lease settings of TestSIGKILLWhileHoldingLeaseFailsOver: short, so
// the test is quick, and passed through the environment, as an operator
// would (RAP_LEASE_TTL, RAP_SWEEP_EVERY). The lease is renewed every third
// of its time, so a holder must stall for over 2.6 s on a loaded machine
// to lose it while alive (which the test would report as a failure).
const (
	failoverLeaseTTL = 4 * time.Second
	failoverSweep    = 500 * time.Millisecond
)

// leaseCompletion is one completion request a replica's model server got.
type leaseCompletion struct {
	replica int
	start   time.Time
	inputs  []string // the test's messages after the last assistant message
}

// leaseInputRE matches the test's messages in a completion request.
var leaseInputRE = regexp.MustCompile(`lease-m\d+`)

// holdingLLMs are the replicas' Anthropic-compatible model servers, one per
// replica so the test knows which process asked. Until the test picks its
// victim, every completion hangs after streaming part of an answer, so the
// process that asks first keeps the thread (and renews its lease) for as
// long as the test wants; afterwards the other replicas answer at once.
type holdingLLMs struct {
	mu      sync.Mutex
	calls   []leaseCompletion
	victim  int // -1 until the test picks it
	release chan struct{}
	srvs    []*wiretest.Server
}

func newHoldingLLMs(t *testing.T, replicas int) *holdingLLMs {
	l := &holdingLLMs{victim: -1, release: make(chan struct{})}
	for k := range replicas {
		srv := wiretest.NewAnthropic(func(req wiretest.Request) wiretest.Reply {
			c := leaseCompletion{replica: k, start: time.Now()}
			for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != model.RoleAssistant; i-- {
				if req.Messages[i].Role == model.RoleUser {
					// Consecutive user messages reach the model as one.
					c.inputs = append(leaseInputRE.FindAllString(req.Messages[i].Text, -1), c.inputs...)
				}
			}
			l.mu.Lock()
			l.calls = append(l.calls, c)
			hold := l.victim < 0 || l.victim == k
			l.mu.Unlock()
			if !hold {
				return wiretest.Reply{Text: fmt.Sprintf("answer from replica %d to %d inputs", k, len(c.inputs))}
			}
			if !req.Stream {
				<-l.release // no stream to leave half-written: just never answer
				return wiretest.Reply{Status: 503, Error: "released"}
			}
			// Part of an answer, then nothing until the client goes away:
			// the text must never reach the history.
			return wiretest.Reply{Text: fmt.Sprintf("half-written by replica %d", k), Hang: true}
		})
		l.srvs = append(l.srvs, srv)
		t.Cleanup(srv.Close)
	}
	t.Cleanup(func() { close(l.release) }) // runs before the servers close
	return l
}

func (l *holdingLLMs) snapshot() []leaseCompletion {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leaseCompletion(nil), l.calls...)
}

// Failover: a thread held by a killed process resumes on
// another within the lease time. Three `rap serve` processes share one
// PostgreSQL database, with --lease-ttl 4s and --sweep-every 500ms (from
// RAP_LEASE_TTL and RAP_SWEEP_EVERY). A message goes to one process, whose
// completion streams part of an answer and then hangs, so that process
// holds the thread's lease and renews it; a second message for the thread
// goes to another process meanwhile (it must not take the live lease). The
// test watches the lease in the database, SIGKILLs the holder right after
// it renews, and checks:
//
//   - no process takes the thread while the dead process's lease is live:
//     the next completion starts after the lease's expiry as last written;
//   - a surviving process takes it, and the model is asked exactly once
//     more, with both messages as new inputs;
//   - the history holds each message once and one whole reply from the
//     survivor, and nothing of the half-streamed answer;
//   - nothing is left queued, and the survivor hands the lease back.
//
// The documented bound is LeaseTTL + SweepEvery from the kill (docs/
// scaling.md, "Lease time and failover"); the test logs the measured
// resumption time and fails only past the bound plus 30 s, so a loaded
// machine cannot make it flake.
func TestSIGKILLWhileHoldingLeaseFailsOver(t *testing.T) {
	storeURL := pgtest.URL(t) // skips without GORAP_TEST_POSTGRES_URL; a schema of its own
	const replicas = 3
	dir := t.TempDir()
	bin := buildRap(t, dir)
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(`{"tool_sets": []}`), 0o644)
	logPath := filepath.Join(dir, "serve.log")

	llms := newHoldingLLMs(t, replicas)
	procs := make([]*serveProcess, replicas)
	bases := make([]string, replicas)
	for k := range procs {
		env := []string{"RAP_STORE=" + storeURL, "RAP_MODEL=",
			"RAP_LEASE_TTL=" + failoverLeaseTTL.String(), "RAP_SWEEP_EVERY=" + failoverSweep.String(),
			"ANTHROPIC_BASE_URL=" + llms.srvs[k].URL, "ANTHROPIC_API_KEY=sk-ant-crash-test-0123456789"}
		procs[k], bases[k] = startServeWith(t, bin, "127.0.0.1:0", filepath.Join(dir, fmt.Sprintf("data-%d", k)),
			cfg, "anthropic:test-model", env, logPath)
	}
	defer func() {
		for _, p := range procs {
			p.kill()
		}
		if t.Failed() {
			t.Logf("rap serve log (tail):\n%s", tail(logPath))
		}
	}()

	ctx := context.Background()
	st, err := postgres.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lease := func(thread string) (owner string, until time.Time, err error) {
		err = st.View(ctx, func(tx store.Tx) error {
			owner, until, err = leases(tx).ThreadLease(thread)
			return err
		})
		return owner, until, err
	}

	c := apiClient(t, bases[0])
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		t.Fatalf("create thread: %v", err)
	}
	const first, second = "lease-m0", "lease-m1"
	if _, err := c.PostMessage(ctx, th.ID, first); err != nil {
		t.Fatalf("post message: %v", err)
	}
	waitUntil(t, 30*time.Second, "the first completion", func() bool { return len(llms.snapshot()) > 0 })
	victim := llms.snapshot()[0].replica
	llms.mu.Lock()
	llms.victim = victim
	llms.mu.Unlock()
	t.Logf("replica %d runs the first completion and holds the thread", victim)

	// A second message, to another process, while the victim holds the
	// thread: accepted (any process takes any thread's input), queued.
	other := (victim + 1) % replicas
	if _, err := apiClient(t, bases[other]).PostMessage(ctx, th.ID, second); err != nil {
		t.Fatalf("post the second message to replica %d: %v", other, err)
	}

	// Watch the lease until the holder renews it, then kill the holder at
	// once: the lease has then nearly its whole lifetime left.
	var owner string
	var lastUntil time.Time
	waitUntil(t, 30*time.Second, "the holder's lease in the database", func() bool {
		var err error
		owner, lastUntil, err = lease(th.ID)
		return err == nil
	})
	renewals := 0
	waitUntil(t, 30*time.Second, "a renewal of the holder's lease", func() bool {
		o, u, err := lease(th.ID)
		if err != nil || o != owner {
			t.Fatalf("the lease changed hands while its holder lived: owner %q → %q (err %v)", owner, o, err)
		}
		if u.After(lastUntil) {
			renewals++
			lastUntil = u
		}
		return renewals > 0
	})
	procs[victim].kill()
	killed := time.Now()
	// The dead process's lease as last written. A renewal committing
	// after this read would only end later, so this is a lower bound of
	// the real expiry.
	if o, u, err := lease(th.ID); err == nil && o == owner && u.After(lastUntil) {
		lastUntil = u
	}
	remaining := lastUntil.Sub(killed)
	if remaining <= 0 {
		t.Fatalf("the lease had expired when the holder was killed (%v ago): the test proves nothing; is the machine stalled?", -remaining)
	}
	for _, cl := range llms.snapshot() {
		if cl.replica != victim {
			t.Fatalf("replica %d asked the model while replica %d held the thread: %+v", cl.replica, victim, cl)
		}
	}
	t.Logf("replica %d SIGKILLed right after renewing its lease (%s); the lease had %v left", victim, owner, remaining.Round(time.Millisecond))

	// A survivor takes the thread and answers both messages once.
	survivor := (victim + 2) % replicas
	c = apiClient(t, bases[survivor])
	bound := failoverLeaseTTL + failoverSweep
	// The new holder's lease tells when it claimed the thread (its expiry
	// less the lease time), unless it answered and handed the lease back
	// between two looks.
	var claimedAt time.Time
	waitUntil(t, bound+30*time.Second, "another process to take the thread", func() bool {
		o, u, err := lease(th.ID)
		if err == nil && o != owner {
			claimedAt = u.Add(-failoverLeaseTTL)
			return true
		}
		return errors.Is(err, store.ErrNotFound)
	})
	var history []api.Message
	waitUntil(t, bound+30*time.Second, "the reply from a surviving replica", func() bool {
		info, err := c.Thread(ctx, th.ID)
		if err != nil || info.Queued != 0 {
			return false
		}
		history, err = c.History(ctx, th.ID)
		return err == nil && len(history) > 0 && history[len(history)-1].Role == api.RoleAssistant
	})
	// The survivor hands the lease back once the thread is idle: after
	// that nothing can ask the model again.
	waitUntil(t, 30*time.Second, "the survivor to hand the lease back", func() bool {
		_, _, err := lease(th.ID)
		return errors.Is(err, store.ErrNotFound)
	})

	var resumed []leaseCompletion
	for _, cl := range llms.snapshot() {
		if cl.replica != victim {
			resumed = append(resumed, cl)
		}
	}
	if len(resumed) != 1 {
		t.Fatalf("the survivors asked the model %d times, want exactly once: %+v", len(resumed), resumed)
	}
	r := resumed[0]
	took := r.start.Sub(killed)
	t.Logf("replica %d resumed the thread (asked the model) %v after the kill, %v after the lease expired; documented bound %v (lease TTL %v + sweep %v)",
		r.replica, took.Round(time.Millisecond), r.start.Sub(lastUntil).Round(time.Millisecond), bound, failoverLeaseTTL, failoverSweep)
	if !claimedAt.IsZero() {
		t.Logf("it claimed the thread %v after the lease expired, and asked the model %v after the claim",
			claimedAt.Sub(lastUntil).Round(time.Millisecond), r.start.Sub(claimedAt).Round(time.Millisecond))
		if claimedAt.Before(lastUntil) {
			t.Fatalf("a process claimed the thread %v before the dead holder's lease expired: a live lease was taken", lastUntil.Sub(claimedAt))
		}
	}
	if r.start.Before(lastUntil) {
		t.Fatalf("replica %d took the thread %v before the dead holder's lease expired (at %s): a live lease was taken",
			r.replica, lastUntil.Sub(r.start), lastUntil.Format("15:04:05.000"))
	}
	if strings.Join(r.inputs, ",") != first+","+second {
		t.Errorf("the survivor's completion had the new inputs %q, want both messages once, in order", r.inputs)
	}

	// The history: both messages once, then one whole reply from the
	// survivor; nothing of the half-streamed answer.
	users := map[string]int{}
	var replies []string
	for i, m := range history {
		if m.Seq != int64(i+1) {
			t.Errorf("message %d has seq %d (gap or reorder)", i, m.Seq)
		}
		if strings.Contains(m.Text, "half-written") {
			t.Errorf("the half-streamed answer of the killed process is in the history: %+v", m)
		}
		switch m.Role {
		case api.RoleUser:
			users[m.Text]++
		case api.RoleAssistant:
			replies = append(replies, m.Text)
		}
	}
	if users[first] != 1 || users[second] != 1 || len(users) != 2 {
		t.Errorf("user messages in the history: %v; want %q and %q once each", users, first, second)
	}
	if want := fmt.Sprintf("answer from replica %d to 2 inputs", r.replica); len(replies) != 1 || replies[0] != want {
		t.Errorf("replies in the history: %q; want exactly %q", replies, want)
	}
	err = st.View(ctx, func(tx store.Tx) error {
		if q, err := tx.Queued(th.ID); err != nil || len(q) != 0 {
			return fmt.Errorf("%d inbox rows are left (%v)", len(q), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// leases returns the lease methods of a transaction of a PostgreSQL store.
func leases(tx store.Tx) store.Leases { return tx.(store.Leases) }
