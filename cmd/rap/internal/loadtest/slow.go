package loadtest

// This file owns "rap bench-slow": many slow clients against a server,
// and the latency a legitimate client sees meanwhile.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SlowConfig is a slow-client attack and what is measured during it.
type SlowConfig struct {
	// URL is the base URL of the server under attack; empty with Command.
	URL string
	// PID is the server's process, whose RSS is sampled; 0 with URL: none.
	PID int
	// Command, when set, starts the server: the first http://host:port
	// its output shows is its URL, and its RSS is sampled.
	Command []string
	// Conns is how many slow connections are kept open (reopened when the
	// server closes one).
	Conns int
	// Ramp is how long the attack runs before the measurement starts.
	Ramp time.Duration
	// Duration is how long the measurement lasts.
	Duration time.Duration
	// Every is the interval between two legitimate requests.
	Every time.Duration
	// Path is the path of the legitimate GET request.
	Path string
	// BodyPath is the path the slow bodies are POSTed to.
	BodyPath string
	// Timeout bounds one legitimate request.
	Timeout time.Duration
	// Reconnect is how long a slow client waits before it reopens a
	// connection the server closed (or could not open).
	Reconnect time.Duration
}

// SlowReport is what RunSlow measured.
type SlowReport struct {
	URL                       string
	RSSBeforeKiB, RSSPeakKiB  int // 0 when not sampled
	RSSEndKiB                 int
	Latencies                 []time.Duration // of every legitimate request, failed ones included (until they failed), sorted
	Failed                    int
	FirstErr                  string
	Opened, CutByServer, Dial int64 // slow connections opened, closed by the server, dial errors
}

// trickle is how many seconds a slow body is trickled, a byte a second,
// before it stalls. There are two kinds of slow client: one sends part of
// a request's headers and stalls; the other sends whole headers of a 1 MB
// body and the start of it, trickles it, then stalls.
const trickle = 10

// RunSlow opens cfg.Conns slow connections to the server, keeps them open
// (reopening those the server closes), and after cfg.Ramp sends a
// legitimate GET request on a new connection every cfg.Every for
// cfg.Duration, sampling the server's RSS every 100 ms.
func RunSlow(ctx context.Context, cfg SlowConfig, stderr io.Writer) (*SlowReport, error) {
	rep := &SlowReport{URL: cfg.URL}
	pid := cfg.PID
	if len(cfg.Command) > 0 {
		p, err := startServerURL(ctx, cfg.Command, stderr)
		if err != nil {
			return nil, err
		}
		defer p.stop()
		rep.URL, pid = p.url, p.cmd.Process.Pid
	}
	u, err := url.Parse(rep.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the server URL %q is not a base URL such as http://127.0.0.1:3001", rep.URL)
	}
	addr := u.Host
	base := strings.TrimSuffix(rep.URL, "/")
	client := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	legit := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Get(base + cfg.Path)
		if err != nil {
			return time.Since(start), err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return time.Since(start), fmt.Errorf("answered %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	if _, err := legit(); err != nil {
		return nil, fmt.Errorf("the legitimate request GET %s%s fails before any load: %w", base, cfg.Path, err)
	}
	rss := func() int {
		if pid == 0 {
			return 0
		}
		return rssOf(pid)
	}
	rep.RSSBeforeKiB = rss()
	var peak atomic.Int64
	peak.Store(int64(rep.RSSBeforeKiB))

	actx, stopAttack := context.WithCancel(ctx)
	var attackers sync.WaitGroup
	defer func() { stopAttack(); attackers.Wait() }()
	header := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: slow", cfg.Path, addr)
	body := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"operation\":\"echo\",", cfg.BodyPath, addr)
	for i := range cfg.Conns {
		attackers.Add(1)
		go func() {
			defer attackers.Done()
			rep.slowClient(actx, addr, header, body, i%2 == 1, cfg.Reconnect)
		}()
	}
	samplerDone := make(chan struct{})
	sctx, stopSampler := context.WithCancel(ctx)
	go func() {
		defer close(samplerDone)
		for t := time.NewTicker(100 * time.Millisecond); ; {
			select {
			case <-sctx.Done():
				t.Stop()
				return
			case <-t.C:
				if r := int64(rss()); r > peak.Load() {
					peak.Store(r)
				}
			}
		}
	}()
	select {
	case <-time.After(cfg.Ramp):
	case <-ctx.Done():
		stopSampler()
		return nil, ctx.Err()
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(cfg.Every)
	end := time.After(cfg.Duration)
loop:
	for {
		select {
		case <-tick.C:
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := legit()
				mu.Lock()
				defer mu.Unlock()
				rep.Latencies = append(rep.Latencies, d)
				if err != nil {
					rep.Failed++
					if rep.FirstErr == "" {
						rep.FirstErr = err.Error()
					}
				}
			}()
		case <-end:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	tick.Stop()
	wg.Wait()
	rep.RSSEndKiB = rss()
	stopSampler()
	<-samplerDone
	rep.RSSPeakKiB = int(peak.Load())
	slices.Sort(rep.Latencies)
	return rep, ctx.Err()
}

// slowClient keeps one slow connection open until ctx ends, reopening it
// whenever the server closes it.
func (rep *SlowReport) slowClient(ctx context.Context, addr, header, body string, sendsBody bool, pause time.Duration) {
	d := net.Dialer{Timeout: 10 * time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			atomic.AddInt64(&rep.Dial, 1)
			sleepCtx(ctx, pause)
			continue
		}
		atomic.AddInt64(&rep.Opened, 1)
		closed := make(chan struct{})
		go func() { // the server closing the connection ends the read
			_, _ = io.Copy(io.Discard, c)
			close(closed)
		}()
		msg := header
		if sendsBody {
			msg = body
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, werr := io.WriteString(c, msg)
		if werr == nil && sendsBody {
			tick := time.NewTicker(time.Second)
			for sent := 0; sent < trickle && werr == nil; sent++ {
				select {
				case <-tick.C:
					_, werr = c.Write([]byte(" "))
				case <-closed:
					werr = net.ErrClosed
				case <-ctx.Done():
					werr = ctx.Err()
				}
			}
			tick.Stop()
		}
		select {
		case <-closed:
			atomic.AddInt64(&rep.CutByServer, 1)
		case <-ctx.Done():
		}
		c.Close()
		<-closed
		sleepCtx(ctx, pause)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// rssOf is the resident set size of process pid in KiB, or 0.
func rssOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

var urlInOutput = regexp.MustCompile(`http://[0-9.]+:[0-9]+`)

// startServerURL runs command and waits for the first http://host:port it
// prints, on standard output or standard error.
func startServerURL(ctx context.Context, command []string, stderr io.Writer) (*serverProcess, error) {
	cmd := exec.Command(command[0], command[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server %q: %w", strings.Join(command, " "), err)
	}
	p := &serverProcess{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 2)
	scan := func(r io.Reader, echo io.Writer) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if u := urlInOutput.FindString(sc.Text()); u != "" {
				select {
				case urls <- u:
				default:
				}
			}
			if echo != nil {
				fmt.Fprintln(echo, sc.Text())
			}
		}
	}
	go scan(out, nil)
	go scan(errOut, stderr)
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case p.url = <-urls:
		return p, nil
	case <-p.done:
		err = errors.New("the server exited without printing its URL")
	case <-time.After(serverProcStart):
		err = fmt.Errorf("the server printed no URL within %v", serverProcStart)
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.stop()
	return nil, err
}

// PrintSlowReport writes r as text.
func PrintSlowReport(w io.Writer, cfg SlowConfig, r *SlowReport) {
	fmt.Fprintf(w, "rap bench-slow: %d slow connections (half stalled headers, half 1 MB bodies trickled 1 byte/s for %d s then stalled; each reopened %v after the server closes it) against %s\n", cfg.Conns, trickle, cfg.Reconnect, r.URL)
	fmt.Fprintf(w, "  machine: %s\n", machine())
	fmt.Fprintf(w, "  legitimate GET %s on a new connection every %v for %v after a %v ramp (timeout %v)\n", cfg.Path, cfg.Every, cfg.Duration, cfg.Ramp, cfg.Timeout)
	n := len(r.Latencies)
	fmt.Fprintf(w, "  sent %d, answered 200 %d, failed %d", n, n-r.Failed, r.Failed)
	if r.FirstErr != "" {
		fmt.Fprintf(w, " (first error: %s)", r.FirstErr)
	}
	fmt.Fprintln(w)
	if n > 0 {
		fmt.Fprintf(w, "  latency (failures counted at the time they failed): p50 %s  p90 %s  p99 %s  max %s\n", ms(percentile(r.Latencies, 50)), ms(percentile(r.Latencies, 90)),
			ms(percentile(r.Latencies, 99)), ms(r.Latencies[n-1]))
	}
	if r.RSSBeforeKiB > 0 {
		fmt.Fprintf(w, "  server RSS: %.1f MiB before, %.1f MiB peak, %.1f MiB at the end\n",
			float64(r.RSSBeforeKiB)/1024, float64(r.RSSPeakKiB)/1024, float64(r.RSSEndKiB)/1024)
	}
	fmt.Fprintf(w, "  slow connections opened %d, closed by the server %d, dial errors %d\n", r.Opened, r.CutByServer, r.Dial)
}
