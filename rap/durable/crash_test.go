//go:build unix

package durable_test

// These tests kill a real tool-server process with SIGKILL and check that
// the durable outbox loses nothing (RAP IN-4).
//
// What the SDK promises: every message Send acknowledged is delivered at
// least once, whatever moment the process dies. A message is removed from
// the outbox only after the receiver's 2xx, so a crash in the window between
// the receiver's 200 and that removal sends the message again after the
// restart. Such duplicates are expected and harmless: the runtime processes
// callbacks idempotently, deduplicating redeliveries by message id (RAP
// RE-6), and every retry carries the same Idempotency-Key header. So the
// promise is "nothing lost; duplicates only across a crash, and only of the
// messages that were in flight when it happened".

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// Environment of the helper process.
const (
	helperModeEnv  = "GORAP_DURABLE_CRASH_HELPER" // "enqueue", "deliver" or "serve"
	helperDBEnv    = "GORAP_DURABLE_CRASH_DB"
	helperURLEnv   = "GORAP_DURABLE_CRASH_URL"
	helperCountEnv = "GORAP_DURABLE_CRASH_N"
	helperLanesEnv = "GORAP_DURABLE_CRASH_LANES"
	// helperHeader carries the helper's mode on every callback, so the
	// endpoint can tell a late request of a killed process from one of
	// its successor.
	helperHeader = "X-Crash-Helper"
)

// crashWait bounds every wait of these tests; passing runs take far less.
const crashWait = 60 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(crashHelper(mode))
	}
	os.Exit(m.Run())
}

// crashHelper is the tool-server process of the crash tests.
//
// In "enqueue" mode it opens the store, starts delivery, sends N
// subscription events spread over LANES callback URLs, one subscription
// per URL (its events are delivered in order, one at a time; different
// subscriptions concurrently), prints "enqueued N" and runs
// until its stdin closes (or it is killed). In "deliver" mode it opens the
// store, delivers everything pending, prints "flushed" and exits.
func crashHelper(mode string) int {
	st, err := durable.Open(os.Getenv(helperDBEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if mode == "serve" {
		return serveHelper(st, logger) // its server has its own sender
	}
	s := rap.NewSender(rap.SenderOptions{
		Outbox: st,
		Retry:  rap.RetryPolicy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		// Held requests must stay one attempt each, however long the
		// test takes to kill the process.
		AttemptTimeout: 2 * crashWait,
		Header:         http.Header{helperHeader: {mode}},
		HeaderOrigins:  []string{os.Getenv(helperURLEnv)},
		Logger:         logger,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	switch mode {
	case "enqueue":
		n, _ := strconv.Atoi(os.Getenv(helperCountEnv))
		lanes, _ := strconv.Atoi(os.Getenv(helperLanesEnv))
		base := os.Getenv(helperURLEnv)
		for i := range n {
			u := fmt.Sprintf("%s/lane/%d?token=secret", base, i%lanes)
			ev := &rap.SubscriptionEvent{GroupID: "thread-1", ToolCallID: fmt.Sprintf("lane-%d", i%lanes), Text: fmt.Sprintf("call-%d", i)}
			if err := s.Send(ctx, u, ev); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		fmt.Printf("enqueued %d\n", n)
		_, _ = io.Copy(io.Discard, os.Stdin) // until the test goes away
		return 0
	case "deliver":
		fctx, fcancel := context.WithTimeout(ctx, crashWait)
		defer fcancel()
		if err := s.Flush(fctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println("flushed")
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

// helper is a running helper process.
type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startHelper re-executes this test binary in helper mode.
func startHelper(t *testing.T, mode, db, url string, n, lanes int) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		helperModeEnv+"="+mode,
		helperDBEnv+"="+db,
		helperURLEnv+"="+url,
		helperCountEnv+"="+strconv.Itoa(n),
		helperLanesEnv+"="+strconv.Itoa(lanes),
	)
	h := &helper{cmd: cmd, lines: make(chan string, 16), stderr: &lockedBuffer{}}
	cmd.Stderr = h.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting helper process: %v", err)
	}
	t.Cleanup(func() {
		h.stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("helper %s stderr:\n%s", mode, h.stderr.String())
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	return h
}

// expect waits for the helper to print want.
func (h *helper) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok || line != want {
			t.Fatalf("helper printed %q (open: %v), want %q; stderr:\n%s", line, ok, want, h.stderr.String())
		}
	case <-time.After(crashWait):
		t.Fatalf("helper did not print %q within %v; stderr:\n%s", want, crashWait, h.stderr.String())
	}
}

// kill SIGKILLs the helper and reaps it.
func (h *helper) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(h.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	err := h.cmd.Wait()
	ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want death by SIGKILL", err)
	}
}

// callbackEndpoint is the runtime's callback endpoint for the crash tests.
// handle decides each request's fate, given the message's call id and how
// many messages the request's URL (lane) has had accepted so far; receipts
// count only messages the endpoint accepted (answered 200).
type callbackEndpoint struct {
	srv *httptest.Server

	mu       sync.Mutex
	handle   func(r *http.Request, id string, laneAccepted int) int
	received map[string]int // call id -> times accepted
	last     map[string]*rap.ToolResult
	order    map[string][]int // lane -> call sequence numbers as first accepted
	attempts int
	bad      []string
	changed  chan struct{}
}

func newCallbackEndpoint(t *testing.T, handle func(r *http.Request, id string, laneAccepted int) int) *callbackEndpoint {
	e := &callbackEndpoint{handle: handle, received: map[string]int{}, last: map[string]*rap.ToolResult{}, order: map[string][]int{}, changed: make(chan struct{})}
	e.srv = httptest.NewServer(e)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *callbackEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	cb, err := rap.DecodeCallback(body)
	res, ok := cb.(*rap.ToolResult)
	var id string
	switch m := cb.(type) {
	case *rap.ToolResult:
		id = m.ID
	case *rap.SubscriptionEvent: // the enqueue helper's: Text is its id
		id, ok = m.Text, true
	}
	e.mu.Lock()
	e.attempts++
	handle := e.handle
	laneAccepted := len(e.order[r.URL.Path])
	switch {
	case err != nil:
		e.bad = append(e.bad, "invalid callback: "+err.Error())
	case !ok:
		e.bad = append(e.bad, "not a tool_result or subscription_event")
	case r.Header.Get("Content-Type") != "application/json": // RAP TR-1
		e.bad = append(e.bad, "Content-Type "+r.Header.Get("Content-Type"))
	}
	e.bump()
	e.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		return
	}

	status := handle(r, id, laneAccepted)

	e.mu.Lock()
	defer e.mu.Unlock()
	if status == http.StatusOK {
		e.received[id]++
		if res != nil {
			e.last[id] = res
		}
		if e.received[id] == 1 {
			seq, _ := strconv.Atoi(strings.TrimPrefix(id, "call-"))
			e.order[r.URL.Path] = append(e.order[r.URL.Path], seq)
		}
	}
	e.bump()
	w.WriteHeader(status)
}

// bump wakes waiters; e.mu must be held.
func (e *callbackEndpoint) bump() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// waitFor polls cond (called with e.mu held) until it holds.
func (e *callbackEndpoint) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(crashWait)
	for {
		e.mu.Lock()
		ok, ch := cond(), e.changed
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s", crashWait, what)
		}
	}
}

// check asserts that every one of the n messages arrived, none unknown, at
// most the ids in mayRepeat more than once, and that each lane saw its
// messages first in send order.
func (e *callbackEndpoint) check(t *testing.T, n int, mayRepeat map[string]bool) (duplicates []string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.bad {
		t.Errorf("endpoint saw %s", b)
	}
	for i := range n {
		id := fmt.Sprintf("call-%d", i)
		c := e.received[id]
		switch {
		case c == 0:
			t.Errorf("%s was lost", id)
		case c > 1 && !mayRepeat[id]:
			t.Errorf("%s arrived %d times; only messages in flight at the crash may repeat", id, c)
		case c > 2:
			t.Errorf("%s arrived %d times, want at most twice", id, c)
		}
		if c > 1 {
			duplicates = append(duplicates, id)
		}
	}
	if len(e.received) != n {
		t.Errorf("endpoint accepted %d distinct messages, want %d", len(e.received), n)
	}
	for lane, seqs := range e.order {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] < seqs[i-1] {
				t.Errorf("%s: call-%d arrived before call-%d: the subscription's order broken", lane, seqs[i-1], seqs[i])
				break
			}
		}
	}
	return duplicates
}

func pendingCount(t *testing.T, path string) int {
	t.Helper()
	st, err := durable.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.Pending(context.Background(), durable.MaxPending)
	if err != nil {
		t.Fatal(err)
	}
	return len(p)
}

func TestCrashAfterEnqueueLosesNothing(t *testing.T) {
	// RAP IN-4: a tool server killed with SIGKILL while the runtime is
	// down (503) loses none of the messages Send had acknowledged. A new
	// process on the same file delivers each exactly once, each
	// subscription's (one per callback URL) in order, once the runtime
	// is healthy.
	const n, lanes = 200, 4
	// Requests of the killed process are refused even when they reach
	// the endpoint after the switch to healthy: only its successor's
	// requests are accepted.
	ep := newCallbackEndpoint(t, func(r *http.Request, _ string, _ int) int {
		if r.Header.Get(helperHeader) == "deliver" {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	db := filepath.Join(t.TempDir(), "tool.db")

	h := startHelper(t, "enqueue", db, ep.srv.URL, n, lanes)
	h.expect(t, fmt.Sprintf("enqueued %d", n))
	ep.waitFor(t, "the helper to be retrying against the 503s", func() bool { return ep.attempts >= lanes })
	h.kill(t)

	if got := pendingCount(t, db); got != n {
		t.Fatalf("after SIGKILL the outbox holds %d messages, want %d", got, n)
	}

	h2 := startHelper(t, "deliver", db, ep.srv.URL, 0, 0)
	h2.expect(t, "flushed")
	if err := h2.cmd.Wait(); err != nil {
		t.Fatalf("deliver helper: %v", err)
	}

	if dups := ep.check(t, n, nil); len(dups) != 0 {
		t.Errorf("duplicates %v; none were in flight at the crash", dups)
	}
	if got := pendingCount(t, db); got != 0 {
		t.Errorf("outbox still holds %d messages", got)
	}
}

func TestCrashMidDeliveryLosesNothing(t *testing.T) {
	// RAP IN-4 with RAP RE-6: the process dies while callbacks are on the
	// wire. The endpoint accepts half the messages, then holds the next
	// request of every callback URL (one subscription each, whose events
	// go out one at a time) until the helper is dead, and accepts
	// those too: the runtime got them, but the dead process never learned
	// so. After a restart nothing is lost, and exactly those in-flight
	// messages arrive a second time, for the runtime to deduplicate.
	const n, lanes = 200, 4
	killed := make(chan struct{})
	var killOnce sync.Once
	release := func() { killOnce.Do(func() { close(killed) }) }
	var holdMu sync.Mutex
	held := map[string]bool{}
	ep := newCallbackEndpoint(t, func(_ *http.Request, id string, laneAccepted int) int {
		select {
		case <-killed:
			return http.StatusOK
		default:
		}
		if laneAccepted < n/lanes/2 {
			time.Sleep(time.Millisecond) // keep delivery slow enough to catch mid-way
			return http.StatusOK
		}
		holdMu.Lock()
		held[id] = true
		holdMu.Unlock()
		<-killed
		return http.StatusOK
	})
	// Registered after the endpoint, so it runs before the server's Close,
	// which would otherwise wait for the held handlers forever.
	t.Cleanup(release)
	db := filepath.Join(t.TempDir(), "tool.db")

	h := startHelper(t, "enqueue", db, ep.srv.URL, n, lanes)
	h.expect(t, fmt.Sprintf("enqueued %d", n))
	ep.waitFor(t, "a request of every lane to be held", func() bool {
		holdMu.Lock()
		defer holdMu.Unlock()
		return len(held) == lanes
	})
	h.kill(t)
	release()

	// The held requests complete on the server side: accepted.
	ep.waitFor(t, "the held requests to be accepted", func() bool {
		holdMu.Lock()
		defer holdMu.Unlock()
		for id := range held {
			if ep.received[id] == 0 {
				return false
			}
		}
		return true
	})
	left := pendingCount(t, db)
	if left < lanes || left >= n {
		t.Fatalf("after the crash the outbox holds %d messages; want the %d held ones and the rest", left, lanes)
	}

	// Restart in-process this time.
	st, err := durable.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := rap.NewSender(rap.SenderOptions{Outbox: st, Retry: rap.RetryPolicy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	fctx, fcancel := context.WithTimeout(context.Background(), crashWait)
	defer fcancel()
	if err := s.Flush(fctx); err != nil {
		t.Fatalf("Flush after restart: %v", err)
	}
	cancel()
	<-done

	holdMu.Lock()
	mayRepeat := held
	holdMu.Unlock()
	dups := ep.check(t, n, mayRepeat)
	if len(dups) != lanes {
		t.Errorf("duplicates = %v, want exactly the %d held messages %v", dups, lanes, mayRepeat)
	}
	if got := pendingCount(t, db); got != 0 {
		t.Errorf("outbox still holds %d messages", got)
	}
}

// serveHelper runs a tool server on the store: "quick" answers at once,
// "build" never returns. It prints "listening URL" and serves until its
// stdin closes (or it is killed).
func serveHelper(st *durable.Store, logger *slog.Logger) int {
	srv := rap.NewServer("crash", &rap.ServerOptions{Store: st, Logger: logger,
		Retry: rap.RetryPolicy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}})
	rap.AddTool(srv, &rap.Tool{Name: "quick", Description: "Answers at once."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		return rap.Text("quick done"), nil
	})
	rap.AddTool(srv, &rap.Tool{Name: "build", Description: "Never finishes."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		select {} // the process is killed in here
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	fmt.Printf("listening %s\n", hs.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// listening reads the helper's "listening URL" line.
func (h *helper) listening(t *testing.T) string {
	t.Helper()
	select {
	case line := <-h.lines:
		if u, ok := strings.CutPrefix(line, "listening "); ok {
			return u
		}
		t.Fatalf("helper printed %q, want \"listening URL\"; stderr:\n%s", line, h.stderr.String())
	case <-time.After(crashWait):
		t.Fatalf("helper did not start within %v; stderr:\n%s", crashWait, h.stderr.String())
	}
	return ""
}

// A tool server SIGKILLed while a handler runs: the call was acknowledged,
// so its runtime waits for a result. The restarted server answers it, once,
// with an error result saying the server stopped; the call that had
// finished before the kill is not answered again (RAP IN-4: every
// acknowledged call gets its one result).
func TestCrashDuringHandlerAnswersTheCall(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tool.db")
	rt := newCallbackEndpoint(t, func(*http.Request, string, int) int { return http.StatusOK })
	invoke := func(base, op, id string) {
		t.Helper()
		body := fmt.Sprintf(`{"operation":%q,"id":%q,"group_id":"thread-1","call_id":"toolu_%s","arguments":{},"callback_url":%q}`,
			op, id, id, rt.srv.URL+"/cb?token=secret")
		resp, err := http.Post(base+"/", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("invoke %s: %v", op, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("invoke %s: status %d", op, resp.StatusCode)
		}
	}

	h1 := startHelper(t, "serve", db, "", 0, 0)
	base := h1.listening(t)
	invoke(base, "quick", "call-1")
	invoke(base, "build", "call-2")
	rt.waitFor(t, "the result of the quick call", func() bool { return rt.received["call-1"] > 0 })
	h1.kill(t)

	h2 := startHelper(t, "serve", db, "", 0, 0)
	h2.listening(t)
	rt.waitFor(t, "an answer to the interrupted call", func() bool { return rt.received["call-2"] > 0 })
	time.Sleep(300 * time.Millisecond) // room for a second answer, which must not come
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if n := rt.received["call-2"]; n != 1 {
		t.Errorf("the interrupted call was answered %d times, want once", n)
	}
	if r := rt.last["call-2"]; !strings.HasPrefix(r.Text, "Error: ") || !strings.Contains(r.Text, "stopped") || r.CallID != "toolu_call-2" {
		t.Errorf("the interrupted call was answered with %+v; want an Error: result saying the server stopped", r)
	}
	// A result delivered just before the kill may come once more (see the
	// file comment); it must never be replaced by an error.
	if n := rt.received["call-1"]; n < 1 || n > 2 || rt.last["call-1"].Text != "quick done" {
		t.Errorf("the finished call got %d results, the last %+v; want its own result, at most twice", n, rt.last["call-1"])
	}
	if len(rt.bad) > 0 {
		t.Errorf("bad callbacks: %v", rt.bad)
	}
}
