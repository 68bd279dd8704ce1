package crashtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
	apitypes "github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// The shape of TestStalledProcessNeverAsksTheModelForLostThreads.
const (
	stallLeaseTTL = 3 * time.Second
	stallSweep    = 500 * time.Millisecond
	stallFor      = 5 * time.Second // SIGSTOP to SIGCONT: the lease and a sweep pass, with time to spare
	stallThreads  = 24
	stallHold     = 100 * time.Millisecond // each completion's time at the model
	stallWarmUp   = 2 * time.Second
	stallAfter    = 3 * time.Second // load after SIGCONT
)

// Where a stallLoad posts.
const (
	stallWarm = iota // to the victim: it holds every thread when it stops
	stallAway        // to the others: a post to a stopped process would hang
	stallAll         // round-robin to all
)

// stallRequest is one completion request a replica's model server got.
type stallRequest struct {
	replica    int
	thread     int
	inputs     []int // the test's messages after the last assistant message
	start, end time.Time
}

func (q stallRequest) String() string {
	return fmt.Sprintf("replica %d, thread %d, inputs %v, %s–%s", q.replica, q.thread, q.inputs,
		q.start.Format("15:04:05.000"), q.end.Format("15:04:05.000"))
}

var stallInputRE = regexp.MustCompile(`s(\d{3})-m(\d+)`)

// stallLoad is the model servers (one per replica, so the test knows which
// process asked) and the conversations: each thread gets its next message
// as soon as the model answered its last one, posted round-robin to the
// replicas, so the thread stays busy and its holder keeps it.
type stallLoad struct {
	t     *testing.T
	bases []string
	srvs  []*wiretest.Server

	mu       sync.Mutex
	reqs     []stallRequest
	ids      []string // thread ids by number
	next     []int    // per thread, the number of the next message to post
	posted   [][]int  // per thread, the messages posted with a 2xx answer
	maybe    [][]int  // per thread, the messages whose post failed (at most once)
	victim   int
	phase    int  // where posts go: stallWarm to the victim, stallAway to the others, stallAll to all
	running  bool // new messages are posted
	inflight sync.WaitGroup
	failures atomic.Int64
}

func newStallLoad(t *testing.T, replicas int) *stallLoad {
	l := &stallLoad{t: t, running: true}
	for k := range replicas {
		srv := wiretest.NewAnthropic(func(req wiretest.Request) wiretest.Reply {
			q := stallRequest{replica: k, thread: -1, start: time.Now()}
			since := 0
			for i, m := range req.Messages {
				if m.Role == model.RoleAssistant {
					since = i + 1
				}
			}
			for i, m := range req.Messages {
				for _, g := range stallInputRE.FindAllStringSubmatch(m.Text, -1) {
					q.thread, _ = strconv.Atoi(g[1])
					if i >= since {
						n, _ := strconv.Atoi(g[2])
						q.inputs = append(q.inputs, n)
					}
				}
			}
			time.Sleep(stallHold)
			q.end = time.Now()
			l.mu.Lock()
			l.reqs = append(l.reqs, q)
			l.mu.Unlock()
			if q.thread >= 0 && len(q.inputs) > 0 {
				go l.advance(q.thread, q.inputs[len(q.inputs)-1])
			}
			return wiretest.Reply{Text: fmt.Sprintf("answer to %v", q.inputs)}
		})
		l.srvs = append(l.srvs, srv)
		t.Cleanup(srv.Close)
	}
	return l
}

// advance posts the thread's next message once the model answered its
// last one (a second answer to the same message posts nothing more).
func (l *stallLoad) advance(thread, answered int) {
	l.mu.Lock()
	if !l.running || l.next[thread] != answered+1 {
		l.mu.Unlock()
		return
	}
	k := l.next[thread]
	l.next[thread]++
	n := len(l.bases)
	replica := (thread + k) % n
	switch l.phase {
	case stallWarm:
		replica = l.victim
	case stallAway:
		replica = (l.victim + 1 + (thread+k)%(n-1)) % n
	}
	id := l.ids[thread]
	l.inflight.Add(1)
	l.mu.Unlock()
	defer l.inflight.Done()
	_, err := apiClient(l.t, l.bases[replica]).PostMessage(context.Background(), id, fmt.Sprintf("s%03d-m%d", thread, k))
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failures.Add(1)
		l.maybe[thread] = append(l.maybe[thread], k)
		return
	}
	l.posted[thread] = append(l.posted[thread], k)
}

func (l *stallLoad) snapshot() []stallRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]stallRequest(nil), l.reqs...)
}

// TestStalledProcessNeverAsksTheModelForLostThreads: a process that
// stalled past its leases asks the model nothing more for the threads it
// lost. Three `rap serve` processes share one PostgreSQL database with
// --lease-ttl 3s. 24 conversations keep them busy: each thread gets its
// next message as soon as the model answered the last one. For 2 s every
// message goes to one process, which so holds every thread; then messages
// go to the other two (which wake the thread at its holder), and the
// holder is stopped (SIGSTOP) with completions in flight, for 5 s (its
// leases expire and the others take the threads), then continued
// (SIGCONT); the load goes on for 3 s, to all three. The model servers,
// one per process, record every completion request with its thread, its
// new inputs (the messages after the last answer) and its time at the
// model. The invariant:
//
//   - only a completion the stopped process began before the stop may be
//     superseded: its inputs may be asked again, by the process that took
//     the thread after its lease expired. A completion it had checked its
//     lease for when the stop landed reaches the model as it resumes (the
//     check cannot be atomic with a request to an outside model): its
//     first request of a thread after SIGCONT counts as begun before the
//     stop, and nothing after it;
//   - every other message reaches the model as a new input once, and no
//     completion of a thread starts while an earlier one of the same thread
//     is still running at the model (the earlier one not the stopped
//     process's from before the stop);
//   - each history holds every message once, and no two answers in a row.
//
// Before lease fencing the stopped process, once continued, asked the
// model again for threads the others had taken (the same inputs twice,
// within milliseconds).
func TestStalledProcessNeverAsksTheModelForLostThreads(t *testing.T) {
	storeURL := pgtest.URL(t) // skips without GORAP_TEST_POSTGRES_URL; a schema of its own
	const replicas = 3
	dir := t.TempDir()
	began := time.Now()
	bin := buildRap(t, dir)
	t.Logf("rap built in %v", time.Since(began).Round(time.Millisecond))
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(`{"tool_sets": []}`), 0o644)

	l := newStallLoad(t, replicas)
	procs := make([]*serveProcess, replicas)
	l.bases = make([]string, replicas)
	logs := make([]string, replicas)
	for k := range procs {
		logs[k] = filepath.Join(dir, fmt.Sprintf("serve-%d.log", k))
		env := []string{"RAP_STORE=" + storeURL, "RAP_MODEL=",
			"RAP_LEASE_TTL=" + stallLeaseTTL.String(), "RAP_SWEEP_EVERY=" + stallSweep.String(),
			"ANTHROPIC_BASE_URL=" + l.srvs[k].URL, "ANTHROPIC_API_KEY=sk-ant-crash-test-0123456789"}
		procs[k], l.bases[k] = startServeWith(t, bin, "127.0.0.1:0", filepath.Join(dir, fmt.Sprintf("data-%d", k)),
			cfg, "anthropic:test-model", env, logs[k])
	}
	const victim = 0
	l.victim = victim
	continued := true
	defer func() {
		if !continued {
			procs[victim].cmd.Process.Signal(syscall.SIGCONT)
		}
		l.mu.Lock()
		l.running = false
		l.mu.Unlock()
		for _, p := range procs {
			p.kill()
		}
		if t.Failed() {
			for k := range procs {
				t.Logf("replica %d log (tail):\n%s", k, tail(logs[k]))
			}
		}
	}()

	ctx := context.Background()
	l.ids = make([]string, stallThreads)
	l.next = make([]int, stallThreads)
	l.posted = make([][]int, stallThreads)
	l.maybe = make([][]int, stallThreads)
	for i := range stallThreads {
		th, err := apiClient(t, l.bases[victim]).CreateThread(ctx, apitypes.CreateThreadRequest{})
		if err != nil {
			t.Fatalf("create thread %d: %v", i, err)
		}
		l.ids[i] = th.ID
	}
	for i := range stallThreads {
		l.mu.Lock()
		l.next[i] = 1
		l.mu.Unlock()
		c := apiClient(t, l.bases[victim])
		if _, err := c.PostMessage(ctx, l.ids[i], fmt.Sprintf("s%03d-m0", i)); err != nil {
			t.Fatalf("post the first message of thread %d: %v", i, err)
		}
		l.mu.Lock()
		l.posted[i] = append(l.posted[i], 0)
		l.mu.Unlock()
	}
	t.Logf("replicas started and threads created in %v", time.Since(began).Round(time.Millisecond))
	// Warm up: every message goes to the victim, which so holds every
	// thread, until it has answered for a while.
	waitUntil(t, 60*time.Second, "the victim to answer for a while", func() bool {
		qs := l.snapshot()
		return len(qs) > 0 && time.Since(qs[0].start) > stallWarmUp
	})

	// Post to the others from now on (a post to a stopped process would
	// hang; they wake the thread at its holder), let the posts under way
	// end, then stop the victim.
	l.mu.Lock()
	l.phase = stallAway
	l.mu.Unlock()
	l.inflight.Wait()
	stopAt := time.Now()
	if err := procs[victim].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued = false
	// The other processes take the victim's threads once its leases
	// expire; wait (bounded) until one of the threads the victim served
	// last before the stop was answered by another, then the rest of the
	// stall. On a loaded machine the sweep takes longer: the stall lasts
	// as long as it needs to prove something.
	waitUntil(t, 90*time.Second, "another replica to answer a thread of the stopped one", func() bool {
		lastBefore := map[int]stallRequest{}
		takenAfter := map[int]bool{}
		for _, q := range l.snapshot() {
			switch {
			case q.start.Before(stopAt):
				if p, ok := lastBefore[q.thread]; !ok || q.start.After(p.start) {
					lastBefore[q.thread] = q
				}
			case q.replica != victim:
				takenAfter[q.thread] = true
			}
		}
		for th, q := range lastBefore {
			if q.replica == victim && takenAfter[th] {
				return true
			}
		}
		return false
	})
	for time.Since(stopAt) < stallFor {
		time.Sleep(50 * time.Millisecond)
	}
	contAt := time.Now()
	if err := procs[victim].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	l.mu.Lock()
	l.phase = stallAll
	l.mu.Unlock()
	for time.Since(contAt) < stallAfter {
		time.Sleep(50 * time.Millisecond)
	}
	l.mu.Lock()
	l.running = false
	l.mu.Unlock()
	l.inflight.Wait()

	// Every posted message answered; the histories read once settled.
	histories := make([][]apitypes.Message, stallThreads)
	for i, id := range l.ids {
		c := apiClient(t, l.bases[(i+1)%replicas])
		waitUntil(t, 60*time.Second, fmt.Sprintf("thread %d settled", i), func() bool {
			info, err := c.Thread(ctx, id)
			if err != nil || info.Queued != 0 {
				return false
			}
			h, err := c.History(ctx, id)
			if err != nil || len(h) == 0 || h[len(h)-1].Role != apitypes.RoleAssistant {
				return false
			}
			histories[i] = h
			return true
		})
	}

	t.Logf("settled %v after SIGCONT", time.Since(contAt).Round(time.Millisecond))
	reqs := l.snapshot()
	// A completion may be superseded when its process lost the thread's
	// lease while it ran: the stopped process's sent before the stop; and
	// another process's begun before it logged losing the lease of that
	// thread (a stall of its own on a loaded machine, not the bug).
	losses := make([]map[string][]time.Time, replicas)
	for k := range replicas {
		if k != victim {
			losses[k] = leaseLosses(t, logs[k])
		}
	}
	// The stopped process's first request of each thread after SIGCONT:
	// one it had checked its lease for just before the stop landed, and
	// sends as it resumes. The lease check before a request cannot be
	// atomic with sending it to an outside model; what the runtime
	// guarantees is that it begins nothing more for a thread it lost.
	firstAfter := map[int]time.Time{}
	for _, q := range reqs {
		if q.replica == victim && !q.start.Before(contAt) {
			if at, ok := firstAfter[q.thread]; !ok || q.start.Before(at) {
				firstAfter[q.thread] = q.start
			}
		}
	}
	superseded := func(q stallRequest) bool {
		if q.replica == victim {
			// Stopped, it begins nothing until SIGCONT: a request that
			// reached the model before contAt was sent before the stop,
			// though it may arrive after stopAt (the signal takes a moment
			// to land, the request a moment to be read).
			return q.start.Before(contAt) || q.start.Equal(firstAfter[q.thread])
		}
		for _, at := range losses[q.replica][l.ids[q.thread]] {
			if q.start.Before(at.Add(time.Millisecond)) { // the log's time is in milliseconds
				return true
			}
		}
		return false
	}
	byThread := map[int][]stallRequest{}
	for _, q := range reqs {
		byThread[q.thread] = append(byThread[q.thread], q)
	}
	if n := len(byThread[-1]); n > 0 {
		t.Errorf("%d completions belong to no thread of the test", n)
	}
	messages, retried, takenOver := 0, 0, 0
	victimAfter := 0
	for _, q := range reqs {
		if q.replica == victim && q.start.After(contAt) {
			victimAfter++
		}
	}
	for i := range stallThreads {
		qs := byThread[i]
		sort.Slice(qs, func(a, b int) bool { return qs[a].start.Before(qs[b].start) })
		// Was the thread the stalled process's at the stop, and taken
		// by another during the stall?
		for k := 1; k < len(qs); k++ {
			if qs[k-1].start.Before(stopAt) && !qs[k].start.Before(stopAt) {
				if qs[k-1].replica == victim && qs[k].replica != victim && qs[k].start.Before(contAt) {
					takenOver++
				}
				break
			}
		}
		// No completion starts while an earlier one of the thread runs,
		// unless the earlier one is the stalled process's.
		for k := 1; k < len(qs); k++ {
			for j := range k {
				stale := qs[k].replica == victim && qs[k].start.Equal(firstAfter[i]) // sent as it resumed
				if qs[k].start.Before(qs[j].end) && !superseded(qs[j]) && !stale {
					t.Errorf("thread %d: two completions overlap at the model:\n  %v\n  %v", i, qs[j], qs[k])
				}
			}
		}
		// Each message reaches the model as a new input once, or twice
		// when the first time was the stalled process's before the stop.
		asked := map[int][]stallRequest{}
		for _, q := range qs {
			for _, n := range q.inputs {
				asked[n] = append(asked[n], q)
			}
		}
		l.mu.Lock()
		posted := append([]int(nil), l.posted[i]...)
		maybe := append([]int(nil), l.maybe[i]...)
		l.mu.Unlock()
		for n, as := range asked {
			for _, q := range as[:len(as)-1] {
				if !superseded(q) {
					t.Errorf("thread %d: message %d reached the model as a new input %d times, the earlier not a completion the stalled process began before the stop:\n  %v", i, n, len(as), q)
				}
			}
			if len(as) > 1 {
				retried++
			}
		}
		for _, n := range posted {
			if len(asked[n]) == 0 {
				t.Errorf("thread %d: message %d never reached the model", i, n)
			}
		}
		messages += len(asked)

		// The history: each posted message once (a failed post at most
		// once), no two answers in a row.
		texts := map[string]int{}
		h := histories[i]
		for j, m := range h {
			if m.Seq != int64(j+1) {
				t.Errorf("thread %d: message %d has seq %d (gap or reorder)", i, j, m.Seq)
			}
			if m.Role == apitypes.RoleUser {
				texts[m.Text]++
			}
			if j > 0 && m.Role == apitypes.RoleAssistant && h[j-1].Role == apitypes.RoleAssistant {
				t.Errorf("thread %d: two answers in a row at %d", i, j)
			}
		}
		for _, n := range posted {
			if text := fmt.Sprintf("s%03d-m%d", i, n); texts[text] != 1 {
				t.Errorf("thread %d: %q is in the history %d times, want once", i, text, texts[text])
			}
		}
		for _, n := range maybe {
			if text := fmt.Sprintf("s%03d-m%d", i, n); texts[text] > 1 {
				t.Errorf("thread %d: %q (its post failed) is in the history %d times, want at most once", i, text, texts[text])
			}
		}
	}
	lost := len(leaseLosses(t, logs[victim]))
	t.Logf("%d requests for %d messages; %d messages asked twice; %d threads taken from it during the stall; it asked %d completions after SIGCONT; %d posts failed; it logged losing the lease of %d threads",
		len(reqs), messages, retried, takenOver, victimAfter, l.failures.Load(), lost)
	if takenOver == 0 {
		t.Errorf("no thread the stopped process worked on was taken by another during the stall: the test proved nothing (is the machine stalled?)")
	}
}

// lossRE matches a "lost the lease" warning of a rap serve log (slog's
// text format, its time in milliseconds).
var lossRE = regexp.MustCompile(`^time=(\S+) .*msg="lost the lease[^"]*" thread=(\S+)`)

// leaseLosses returns, by thread id, when the process whose log is at path
// logged losing the thread's lease.
func leaseLosses(t *testing.T, path string) map[string][]time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]time.Time{}
	for _, line := range strings.Split(string(b), "\n") {
		m := lossRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("a rap serve log line with an unreadable time: %q", line)
		}
		out[m[2]] = append(out[m[2]], at)
	}
	return out
}
