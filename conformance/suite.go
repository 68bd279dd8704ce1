package conformance

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Func is the body of a check. It reports through t: Failf or Skipf end the
// check at once; returning normally passes it.
type Func func(t *T)

type entry struct {
	check Check
	run   Func
}

// Suite is an ordered list of checks. Checks run one after another in the
// order they were added, so a later check may rely on what an earlier one
// found (see T.Requires).
type Suite struct {
	// Name names the suite in reports: "tool" or "runtime".
	Name     string
	entries  []entry
	ids      map[string]bool
	cleanups []func()
	always   map[string]bool
}

// AlwaysRun marks checks that run even when RunOptions.Only does not
// select them, because later checks rely on what they find (see
// T.Requires).
func (s *Suite) AlwaysRun(ids ...string) {
	if s.always == nil {
		s.always = make(map[string]bool)
	}
	for _, id := range ids {
		s.always[id] = true
	}
}

// Cleanup registers f to run when each Run of the suite ends, after its
// last check, such as to stop a server the checks started.
func (s *Suite) Cleanup(f func()) {
	s.cleanups = append(s.cleanups, f)
}

// Add appends a check to the suite. It panics when the check's ID is empty
// or already in the suite, a programming error.
func (s *Suite) Add(c Check, f Func) {
	if c.ID == "" || s.ids[c.ID] {
		panic(fmt.Sprintf("conformance: check ID %q is empty or added twice", c.ID))
	}
	if s.ids == nil {
		s.ids = make(map[string]bool)
	}
	s.ids[c.ID] = true
	s.entries = append(s.entries, entry{c, f})
}

// Checks returns the suite's checks in the order they run.
func (s *Suite) Checks() []Check {
	out := make([]Check, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.check
	}
	return out
}

// RunOptions tune a suite's run.
type RunOptions struct {
	// Subject names what is checked (a URL), for the report.
	Subject string
	// CheckTimeout bounds each check; a check still running when it passes
	// fails with a message saying so. Zero means one minute.
	CheckTimeout time.Duration
	// Only, when not empty, runs just the checks whose ID equals one of its
	// entries or starts with it followed by a dot; the others are skipped.
	Only []string
	// Transport carries the checks' HTTP requests; nil means a transport
	// of its own with no proxy.
	Transport http.RoundTripper
	// Progress, when set, is called after each check with its result.
	Progress func(Result)
}

// Run runs the suite's checks in order and returns their report. It stops
// early only when ctx ends; the checks not run then are skipped.
func (s *Suite) Run(ctx context.Context, opts RunOptions) *Report {
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = time.Minute
	}
	base := opts.Transport
	if base == nil {
		base = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: 30 * time.Second}
	}
	rep := &Report{Suite: s.Name, Subject: opts.Subject, Started: time.Now()}
	defer func() {
		for i := len(s.cleanups) - 1; i >= 0; i-- {
			s.cleanups[i]()
		}
	}()
	status := make(map[string]Status, len(s.entries))
	for _, e := range s.entries {
		var res Result
		switch {
		case ctx.Err() != nil:
			res = Result{Check: e.check, Status: Skip, Message: "not run: the run was stopped"}
		case !selected(e.check.ID, opts.Only) && !s.always[e.check.ID]:
			res = Result{Check: e.check, Status: Skip, Message: "not selected"}
		default:
			res = runOne(ctx, e, opts.CheckTimeout, base, status)
		}
		status[e.check.ID] = res.Status
		rep.Results = append(rep.Results, res)
		if opts.Progress != nil {
			opts.Progress(res)
		}
	}
	rep.Duration = time.Since(rep.Started)
	return rep
}

func selected(id string, only []string) bool {
	if len(only) == 0 {
		return true
	}
	for _, o := range only {
		if id == o || strings.HasPrefix(id, o+".") {
			return true
		}
	}
	return false
}

// runOne runs one check in its own goroutine, so that Failf and Skipf can
// end it wherever they are called, and bounds it by timeout.
func runOne(ctx context.Context, e entry, timeout time.Duration, base http.RoundTripper, done map[string]Status) Result {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := &T{ctx: cctx, check: e.check, status: Pass, done: done}
	t.client = &http.Client{Transport: &recorder{base: base, t: t}, Timeout: timeout}
	start := time.Now()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer func() {
			if p := recover(); p != nil {
				t.end(Fail, fmt.Sprintf("the check itself failed (a bug in the conformance kit): %v", p))
			}
		}()
		e.run(t)
	}()
	select {
	case <-finished:
	case <-cctx.Done():
		t.end(Fail, fmt.Sprintf("the check did not finish within %s: the implementation did not answer", timeout))
		// The check's goroutine sees its context cancelled and ends on
		// its own; its late reports are ignored.
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	return Result{Check: e.check, Status: t.status, Message: t.message(), Duration: time.Since(start), Exchanges: t.exchanges}
}

// T is a running check's handle: its context, its HTTP client, and the
// calls that report its outcome.
type T struct {
	ctx    context.Context
	check  Check
	client *http.Client
	done   map[string]Status // the statuses of the checks run before

	mu        sync.Mutex
	status    Status
	msg       string
	notes     []string
	exchanges []Exchange
	ended     bool
	decided   bool
}

// Context returns the check's context, ended when its time is up or the
// run is stopped.
func (t *T) Context() context.Context { return t.ctx }

// Check returns the check being run.
func (t *T) Check() Check { return t.check }

// Client returns an HTTP client whose exchanges are kept with the check's
// result.
func (t *T) Client() *http.Client { return t.client }

// Failf fails the check with a message saying what was wrong, and ends it.
// It must be called from the check's own goroutine.
func (t *T) Failf(format string, args ...any) {
	t.end(Fail, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// Skipf skips the check with a message saying why, and ends it. It must be
// called from the check's own goroutine.
func (t *T) Skipf(format string, args ...any) {
	t.end(Skip, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// Logf adds a note to the check's message, shown whatever its outcome.
func (t *T) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		t.notes = append(t.notes, fmt.Sprintf(format, args...))
	}
}

// Requires skips the check unless every check named passed earlier in the
// run.
func (t *T) Requires(ids ...string) {
	for _, id := range ids {
		if t.done[id] != Pass {
			t.Skipf("needs check %s, which did not pass", id)
		}
	}
}

// Record keeps an exchange the check observed other than through its
// client, such as a callback the implementation sent to the kit.
func (t *T) Record(x Exchange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		t.exchanges = append(t.exchanges, x)
	}
}

// end sets the check's outcome; the first one set stands.
func (t *T) end(s Status, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended || t.decided {
		return
	}
	t.decided = true
	t.status = s
	t.msg = msg
}

func (t *T) message() string {
	parts := make([]string, 0, 1+len(t.notes))
	if t.msg != "" {
		parts = append(parts, t.msg)
	}
	parts = append(parts, t.notes...)
	return strings.Join(parts, "; ")
}
