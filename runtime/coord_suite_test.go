package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// The suite of the seam between one process and several (coord.go): what
// the engine relies on from either implementation, checked on runtimes as
// a client and the engine see them. Each case gets a cluster, the runtimes
// of one store: one runtime for a store one process holds (the local
// implementation), two for a shared store (the shared one, on
// PostgreSQL). A case may open a second cluster, on another store.

// openCluster returns the runtimes of a new store, each started with o;
// the test stops them when it ends.
type openCluster func(t *testing.T, o envOptions) []*env

// coordCases lists the suite's cases.
var coordCases = []struct {
	name string
	fn   func(t *testing.T, open openCluster)
}{
	{"OneWorkerPerThread", testCoordOneWorkerPerThread},
	{"WakeAfterCommitNeverLost", testCoordWakeNeverLost},
	{"EventsFollowedInOrder", testCoordEventsInOrder},
	{"ResumeAfterLastEventID", testCoordResume},
	{"ResetOnIDsItCannotResume", testCoordReset},
}

// runCoordSuite runs every case of the suite on clusters from open.
func runCoordSuite(t *testing.T, open openCluster) {
	for _, c := range coordCases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// TestCoordLocal runs the seam's suite on the local implementation: one
// runtime alone on its SQLite store.
func TestCoordLocal(t *testing.T) {
	runCoordSuite(t, func(t *testing.T, o envOptions) []*env {
		e := newEnv(t, o)
		if _, ok := e.rt.coord.(*localCoord); !ok {
			t.Fatalf("a runtime on SQLite runs with %T, want the local coord", e.rt.coord)
		}
		return []*env{e}
	})
}

// TestCoordShared runs the seam's suite on the shared implementation: two
// runtimes on one PostgreSQL schema, as two `rap serve` processes. It is
// skipped when GORAP_TEST_POSTGRES_URL is unset.
func TestCoordShared(t *testing.T) {
	pgtest.Require(t)
	runCoordSuite(t, func(t *testing.T, o envOptions) []*env {
		o.pgURL = pgtest.URL(t)
		envs := []*env{newEnv(t, o), newEnv(t, o)}
		for _, e := range envs {
			if _, ok := e.rt.coord.(*sharedCoord); !ok {
				t.Fatalf("a runtime on PostgreSQL runs with %T, want the shared coord", e.rt.coord)
			}
		}
		return envs
	})
}

// answered reports whether every message of texts is in h once, and the
// last message is an answer.
func answered(h []store.Message, texts []string) bool {
	seen := map[string]int{}
	for _, m := range h {
		if m.Role == store.RoleUser {
			seen[m.Text]++
		}
	}
	for _, text := range texts {
		if seen[text] != 1 {
			return false
		}
	}
	return len(h) > 0 && h[len(h)-1].Role == store.RoleAssistant
}

// testCoordOneWorkerPerThread: messages sent at once to several threads,
// each through any runtime of the cluster, are each answered once, and no
// two completions of one thread overlap in time (RAP RT-2), whichever
// runtime ran them. A claim one runtime holds keeps the others from
// claiming the thread until it is handed back.
func testCoordOneWorkerPerThread(t *testing.T, open openCluster) {
	g := &gate{inner: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), active: map[string]int{},
		hold: func(string) { time.Sleep(2 * time.Millisecond) }} // widens any overlap
	envs := open(t, envOptions{model: g})
	const threads, perThread = 6, 4
	ids := make([]string, threads)
	texts := make([][]string, threads)
	for i := range ids {
		ids[i] = envs[i%len(envs)].newThread()
		for j := range perThread {
			texts[i] = append(texts[i], fmt.Sprintf("t%02d-m%d", i, j))
		}
	}
	var wg sync.WaitGroup
	for i, th := range ids {
		wg.Go(func() {
			for j, text := range texts[i] {
				if err := envs[(i+j)%len(envs)].rt.PostMessage(context.Background(), th, text); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i, th := range ids {
		h := envs[0].waitHistory(th, fmt.Sprintf("thread %d answered", i), func(h []store.Message) bool { return answered(h, texts[i]) })
		for k := 1; k < len(h); k++ {
			if h[k].Role == store.RoleAssistant && h[k-1].Role == store.RoleAssistant {
				t.Errorf("thread %d: two answers in a row (an input answered twice):\n%s", i, dump(h))
			}
		}
	}
	g.mu.Lock()
	overlap := g.overlap
	g.mu.Unlock()
	if len(overlap) > 0 {
		t.Errorf("completions of one thread overlapped: %v", overlap)
	}

	// The seam's claim itself, on a thread no worker runs.
	th := envs[0].newThread()
	c := envs[0].rt.coord.claimThread(th)
	if c == nil {
		t.Fatal("a free thread could not be claimed")
	}
	if err := c.lost(); err != nil {
		t.Fatalf("the claim of a free thread is lost at once: %v", err)
	}
	for i, e := range envs[1:] {
		if other := e.rt.coord.claimThread(th); other != nil {
			other.end(true)
			t.Errorf("runtime %d claimed a thread runtime 0 holds", i+1)
		}
	}
	c.end(true)
	for i, e := range envs {
		var again threadClaim
		poll(t, fmt.Sprintf("runtime %d to claim the thread handed back", i), func() bool {
			again = e.rt.coord.claimThread(th)
			return again != nil
		})
		again.end(true)
	}
}

// testCoordWakeNeverLost: messages committed while the thread's worker
// runs, hands the thread back or has just left, through any runtime, are
// all answered without the sweep (an hour here): no wake-up after a
// commit is lost.
func testCoordWakeNeverLost(t *testing.T, open openCluster) {
	g := &gate{inner: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), active: map[string]int{},
		hold: func(string) { time.Sleep(time.Millisecond) }}
	envs := open(t, envOptions{model: g, tweak: func(c *Config) { c.SweepEvery = time.Hour }})
	const threads, rounds = 4, 12
	ids := make([]string, threads)
	for i := range ids {
		ids[i] = envs[i%len(envs)].newThread()
	}
	var wg sync.WaitGroup
	for i, th := range ids {
		wg.Go(func() {
			for j := range rounds {
				e := envs[(i+j)%len(envs)]
				if err := e.rt.PostMessage(context.Background(), th, fmt.Sprintf("t%d-r%02d", i, j)); err != nil {
					t.Error(err)
					return
				}
				// Vary the moment of the next commit against the worker's
				// slice and hand-back.
				time.Sleep(time.Duration(j%4) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	for i, th := range ids {
		var want []string
		for j := range rounds {
			want = append(want, fmt.Sprintf("t%d-r%02d", i, j))
		}
		envs[0].waitHistory(th, fmt.Sprintf("every message of thread %d answered without the sweep", i),
			func(h []store.Message) bool { return answered(h, want) })
	}
}

// eventOrder returns the order key of a current-format id: (N, K).
func eventOrder(t *testing.T, id string) (uint64, uint64) {
	t.Helper()
	e, reset := parseEventID(id)
	if reset != "" {
		t.Fatalf("event id %q is not of the current format: %s", id, reset)
	}
	return e.n, e.k
}

// checkFollowed checks that evs, events of one stream, carry ids that
// increase and hold the messages of want, in order, each once.
func checkFollowed(t *testing.T, which string, evs []idEvent, want []string) {
	t.Helper()
	var pn, pk uint64
	seen := false
	for _, ev := range evs {
		if ev.id == "" || strings.Contains(ev.id, replayIDSep) {
			continue // replayed state
		}
		n, k := eventOrder(t, ev.id)
		if seen && (n < pn || n == pn && k <= pk) {
			t.Fatalf("%s: id %s does not follow the one before (%d.%d)", which, ev.id, pn, pk)
		}
		pn, pk, seen = n, k, true
	}
	if got := messageTexts(t, evs); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s saw messages %q, want %q", which, got, want)
	}
}

// testCoordEventsInOrder: a client of every runtime of the cluster,
// connected before the messages, sees each saved message once, in order,
// whichever runtime ran the slice, with ids that increase.
func testCoordEventsInOrder(t *testing.T, open openCluster) {
	envs := open(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	th := envs[0].newThread()
	var streams []*idStream
	for _, e := range envs {
		s := openIDStream(t, e.srv.URL, th, "", false)
		s.until(t, EventReplayDone)
		streams = append(streams, s)
	}
	var want []string
	for j := range 4 {
		text := fmt.Sprintf("m%d", j)
		envs[j%len(envs)].post(th, text)
		want = append(want, "user:"+text, "assistant:ok")
		envs[0].waitHistory(th, "the answer to "+text, func(h []store.Message) bool { return len(h) == 2*(j+1) })
	}
	for i, s := range streams {
		var got []idEvent
		for len(messageTexts(t, got)) < len(want) {
			got = append(got, s.next(t))
		}
		checkFollowed(t, fmt.Sprintf("the client of runtime %d", i), got, want)
	}
}

// testCoordResume: a client that disconnects and reconnects, to any
// runtime of the cluster, with the id of the last event it received gets
// exactly the events it missed (a resume, no reset, nothing twice), then
// the live ones.
func testCoordResume(t *testing.T, open openCluster) {
	envs := open(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	th := envs[0].newThread()
	s := openIDStream(t, envs[0].srv.URL, th, "", false)
	s.until(t, EventReplayDone)
	envs[0].post(th, "m1")
	first := s.untilMessage(t, `"ok"`)
	last := lastID(first, "")
	s.close()

	envs[len(envs)-1].post(th, "m2")
	envs[0].waitHistory(th, "the answer to m2", func(h []store.Message) bool { return len(h) == 4 })
	back := envs[len(envs)-1]
	r := openIDStream(t, back.srv.URL, th, last, false)
	resumed := r.until(t, EventReplayDone)
	if resumed[0].typ == EventReset {
		t.Fatalf("resuming after %s: reset %s", last, resumed[0].data)
	}
	if done := resumed[len(resumed)-1]; !strings.Contains(done.data, `"mode":"resume"`) {
		t.Fatalf("resuming after %s ended with %+v, want replay_done of a resume", last, done)
	}
	got := resumed
	for len(messageTexts(t, got)) < 2 {
		got = append(got, r.next(t))
	}
	checkFollowed(t, "the resumed client", append([]idEvent{{id: last}}, got...), []string{"user:m2", "assistant:ok"})

	// And live: the next message reaches the resumed client once.
	envs[0].post(th, "m3")
	checkFollowed(t, "the resumed client, live", r.untilMessage(t, `"ok"`), []string{"user:m3", "assistant:ok"})
}

// testCoordReset: a Last-Event-ID the cluster cannot resume — of an
// earlier release's format, of another runtime or store of the same kind,
// of the other kind of store, of the middle of a replay, or no id at all —
// gets a reset event with the reason, then a full replay.
func testCoordReset(t *testing.T, open openCluster) {
	opts := envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}}
	envs := open(t, opts)
	th := envs[0].newThread()
	envs[0].post(th, "hi")
	envs[0].waitHistory(th, "the answer", func(h []store.Message) bool { return len(h) == 2 })
	s := openIDStream(t, envs[0].srv.URL, th, "", false)
	replay := s.until(t, EventReplayDone)
	s.close()
	own, reset := parseEventID(replay[len(replay)-1].id)
	if reset != "" {
		t.Fatalf("the replay_done marker's id %q is not of the current format", replay[len(replay)-1].id)
	}

	// An id of another store of the same kind, from a real runtime.
	others := open(t, opts)
	oth := others[0].newThread()
	o := openIDStream(t, others[0].srv.URL, oth, "", false)
	otherMark := lastID(o.until(t, EventReplayDone), "")
	o.close()

	sameKind := map[byte]string{sourceLocal: resetRestarted, sourceShared: resetOtherStore}[own.source[0]]
	otherKind, otherReason := map[byte]string{sourceLocal: "s", sourceShared: "p"}[own.source[0]],
		map[byte]string{sourceLocal: resetFromShared, sourceShared: resetFromLocal}[own.source[0]]
	for _, c := range []struct{ id, reason string }{
		{"not-an-id", resetMalformed},
		{"v2." + own.source + ".1.2.3", resetMalformed},
		{"3f9a1c0e5b2d-41", resetOldFormat},
		{"db-1", resetOldFormat},
		{"db-1.2", resetOldFormat},
		{otherMark, sameKind},
		{"v2." + otherKind + "0123456789ab.1", otherReason},
		{replay[0].id, resetInReplay},
	} {
		for i, e := range envs {
			r := openIDStream(t, e.srv.URL, th, c.id, false)
			evs := r.until(t, EventReplayDone)
			r.close()
			if evs[0].typ != EventReset || !strings.Contains(evs[0].data, c.reason) {
				t.Errorf("runtime %d given Last-Event-ID %q: first event %+v, want a reset saying %q", i, c.id, evs[0], c.reason)
				continue
			}
			if done := evs[len(evs)-1]; !strings.Contains(done.data, `"mode":"reset"`) {
				t.Errorf("runtime %d given Last-Event-ID %q: replay ended with %+v, want replay_done of a reset", i, c.id, done)
			}
			if m := messageTexts(t, evs); strings.Join(m, "|") != "user:hi|assistant:ok" {
				t.Errorf("runtime %d given Last-Event-ID %q replayed messages %q, want the whole history", i, c.id, m)
			}
		}
	}
}
