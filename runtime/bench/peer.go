package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/internal/cpustat"
)

// The cycle's far end in a process of its own. RunCycles in one process
// counts, in its CPU time, the runtime and both ends of the tool dispatch
// and of the result callback. With CycleOptions.Peer the tool server and
// the load generator (and, for "rap bench-runtime --provider", the model
// server) run in a peer process instead, as ../shared/bench/harness runs
// them for "rap serve", so the bench process's CPU time is the runtime's
// alone.
//
// The peer speaks lines on its standard input and output. It prints
// "model URL" lines (PeerOptions.Header), "tools URL" and "ready"; then it
// answers each request line: "measure" with "ok" (counting starts),
// "count" with "count MEASURED INVOKED", "result" with "result CYCLES
// FAILURES P50 P90 P99 MAX" (nanoseconds; counting and posting stop), "cpu" with
// "cpu NANOSECONDS" (its process's CPU time so far). Between answers it
// prints "renew" when a thread has spent its budget, and the parent starts
// a thread in its place. It stops when its input closes.

// PeerOptions configures ServePeer.
type PeerOptions struct {
	// Budget, when positive, is the tool calls per thread after which the
	// peer asks the parent for a new thread; zero for the scripted model,
	// whose threads loop forever.
	Budget int
	// Conns is the idle connections the load generator keeps to the
	// runtime.
	Conns int
	// Header lines are printed first (the URL of a model server that the
	// caller runs in this process, say).
	Header []string
}

// ServePeer runs the tool server and load generator of a cycle run for a
// parent RunCycles (CycleOptions.Peer), speaking the protocol above on in
// and out, until in closes.
func ServePeer(ctx context.Context, opts PeerOptions, in io.Reader, out io.Writer) error {
	if opts.Conns <= 0 {
		opts.Conns = 256
	}
	tools := newLoopTool(true, opts.Conns)
	tools.budget = opts.Budget
	var wmu sync.Mutex
	say := func(line string) {
		wmu.Lock()
		defer wmu.Unlock()
		io.WriteString(out, line+"\n")
	}
	if opts.Budget > 0 {
		tools.renew = func() { say("renew") }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the tool server: %w", err)
	}
	tools.base = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: tools, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer func() {
		tools.stop()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		tools.wait()
	}()
	for _, h := range opts.Header {
		say(h)
	}
	say("tools " + tools.base)
	say("ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch strings.TrimSpace(sc.Text()) {
		case "measure":
			tools.startMeasuring()
			say("ok")
		case "count":
			say(fmt.Sprintf("count %d %d", tools.measured(), tools.invoked.Load()))
		case "result":
			cycles, lat := tools.result()
			tools.stop()
			p50, p90, p99, mx := percentiles(lat)
			say(fmt.Sprintf("result %d %d %d %d %d %d", cycles, tools.failures.Load(), p50, p90, p99, mx))
		case "why":
			say("why " + strconv.Quote(tools.firstFailure()))
		case "cpu":
			cpu, _ := cpustat.Process()
			say(fmt.Sprintf("cpu %d", int64(cpu)))
		default:
			say("error unknown request " + strconv.Quote(sc.Text()))
		}
	}
	return sc.Err()
}

// Peer is a running peer process (ServePeer) seen from the parent.
type Peer struct {
	// ModelURL is the URL of the "model" header line, if any.
	ModelURL string
	// ToolsURL is the peer's tool server.
	ToolsURL string

	cmd     *exec.Cmd
	in      io.WriteCloser
	mu      sync.Mutex // one request at a time
	replies chan string
	renew   atomic.Pointer[func()]
	done    chan struct{}
}

// StartPeer starts cmd, a program that calls ServePeer, and reads its
// header. The caller closes the peer.
func StartPeer(cmd *exec.Cmd) (*Peer, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the bench peer: %w", err)
	}
	p := &Peer{cmd: cmd, in: in, replies: make(chan string, 1), done: make(chan struct{})}
	out := bufio.NewReader(outPipe)
	for {
		line, err := out.ReadString('\n')
		line = strings.TrimSpace(line)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("the bench peer ended before it was ready (last line %q): %v", line, err)
		}
		if line == "ready" {
			break
		}
		if u, ok := strings.CutPrefix(line, "model "); ok {
			p.ModelURL = u
		} else if u, ok := strings.CutPrefix(line, "tools "); ok {
			p.ToolsURL = u
		}
	}
	if p.ToolsURL == "" {
		p.Close()
		return nil, errors.New("the bench peer named no tool server")
	}
	go func() {
		defer close(p.done)
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSpace(line)
			if line == "renew" {
				if f := p.renew.Load(); f != nil {
					go (*f)()
				}
				continue
			}
			p.replies <- line
		}
	}()
	return p, nil
}

// callText sends one request and returns its answer after the answer's
// first word, which must be want.
func (p *Peer) callText(req, want string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.in, req+"\n"); err != nil {
		return "", fmt.Errorf("bench peer: %s: %w", req, err)
	}
	var line string
	select {
	case line = <-p.replies:
	case <-p.done:
		return "", fmt.Errorf("bench peer: %s: the peer ended", req)
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("bench peer: %s: no answer in 30 s", req)
	}
	first, rest, _ := strings.Cut(line, " ")
	if first != want {
		return "", fmt.Errorf("bench peer: %s: answered %q", req, line)
	}
	return rest, nil
}

// call sends one request and returns the figures of its answer after the
// answer's first word, which must be want.
func (p *Peer) call(req, want string) ([]int64, error) {
	rest, err := p.callText(req, want)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(rest)
	n := make([]int64, 0, len(f))
	for _, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bench peer: %s: answered %q", req, want+" "+rest)
		}
		n = append(n, v)
	}
	return n, nil
}

// CPU returns the peer process's CPU time so far.
func (p *Peer) CPU() (time.Duration, error) {
	n, err := p.call("cpu", "cpu")
	if err != nil {
		return 0, err
	}
	if len(n) != 1 {
		return 0, errors.New("bench peer: cpu: no figure")
	}
	return time.Duration(n[0]), nil
}

// Close ends the peer and waits for it.
func (p *Peer) Close() error {
	p.in.Close()
	return p.cmd.Wait()
}

// peerTools is the cycle's tool end in a peer process.
type peerTools struct {
	p         *Peer
	failures  atomic.Int64 // renewals that failed here
	firstFail atomic.Pointer[string]
}

func (t *peerTools) url() string { return t.p.ToolsURL }

func (t *peerTools) setRenew(f func()) { t.p.renew.Store(&f) }

func (t *peerTools) startMeasuring() error {
	_, err := t.p.call("measure", "ok")
	return err
}

func (t *peerTools) counts() (measured, invoked int64, err error) {
	n, err := t.p.call("count", "count")
	if err != nil {
		return 0, 0, err
	}
	if len(n) != 2 {
		return 0, 0, errors.New("bench peer: count: want two figures")
	}
	return n[0], n[1], nil
}

func (t *peerTools) finish() (cycleCounts, error) {
	t.p.renew.Store(nil)
	n, err := t.p.call("result", "result")
	if err != nil {
		return cycleCounts{}, err
	}
	if len(n) != 6 {
		return cycleCounts{}, errors.New("bench peer: result: want six figures")
	}
	d := func(v int64) time.Duration { return time.Duration(v) }
	c := cycleCounts{cycles: n[0], failures: n[1] + t.failures.Load(), p50: d(n[2]), p90: d(n[3]), p99: d(n[4]), max: d(n[5])}
	if p := t.firstFail.Load(); p != nil {
		c.firstFailure = *p
	}
	if n[1] > 0 {
		why, err := t.p.callText("why", "why")
		if err != nil {
			return cycleCounts{}, err
		}
		if s, err := strconv.Unquote(why); err == nil && s != "" {
			c.firstFailure = s // the peer's failures are most of them
		}
	}
	return c, nil
}

func (t *peerTools) addFailure(why string) {
	t.firstFail.CompareAndSwap(nil, &why)
	t.failures.Add(1)
}

// localTools is the cycle's tool end in this process.
type localTools struct{ l *loopTool }

func (t localTools) url() string       { return t.l.base }
func (t localTools) setRenew(f func()) { t.l.renew = f }
func (t localTools) startMeasuring() error {
	t.l.startMeasuring()
	return nil
}
func (t localTools) counts() (measured, invoked int64, err error) {
	return t.l.measured(), t.l.invoked.Load(), nil
}
func (t localTools) finish() (cycleCounts, error) {
	cycles, lat := t.l.result()
	t.l.stop()
	c := cycleCounts{cycles: cycles, failures: t.l.failures.Load(), firstFailure: t.l.firstFailure()}
	c.p50, c.p90, c.p99, c.max = percentiles(lat)
	return c, nil
}
func (t localTools) addFailure(why string) { t.l.addFailure(why) }

// cycleCounts is what the tool end counted during the measurement.
type cycleCounts struct {
	cycles, failures   int64
	firstFailure       string
	p50, p90, p99, max time.Duration
}

// toolEnd is the tool server and load generator of a cycle run, in this
// process or in a peer.
type toolEnd interface {
	url() string
	setRenew(func())
	startMeasuring() error
	counts() (measured, invoked int64, err error)
	finish() (cycleCounts, error)
	addFailure(why string)
}
