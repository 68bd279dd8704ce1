package runtime

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// procRSS returns the process's resident set size in bytes (Linux; 0
// elsewhere).
func procRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// The soak of the stream and connection limits: 2,000 event streams of which half
// never read, and 5,000 connections trickling a request body, against the
// runtime served as "rap serve" serves it (NewHTTPServer, LimitListener,
// default limits), on loopback, while events are published. The runtime
// must keep answering GET /v1/threads/{id} quickly, drop every stalled
// stream, and keep its memory bounded. About 40 s; run it with
//
//	RAP_SOAK=1 go test ./runtime -run TestSoakStreamsAndSlowBodies -v
func TestSoakStreamsAndSlowBodies(t *testing.T) {
	if testing.Short() || os.Getenv("RAP_SOAK") == "" {
		t.Skip("soak test: set RAP_SOAK=1 (and run without -short)")
	}
	const (
		nThreads   = 100
		perThread  = 20 // streams per thread: threads 0-49 read, 50-99 never read
		nSlow      = 5000
		publishFor = 25 * time.Second
	)
	e := newEnv(t, envOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(e.rt.Handler(), rap.HTTPLimits{}, nil)
	go srv.Serve(rap.HTTPLimits{}.Listener(ln, nil))
	defer srv.Close()
	addr := ln.Addr().String()
	base := "http://" + addr
	threads := make([]string, nThreads)
	for i := range threads {
		threads[i] = e.newThread()
	}

	goruntime.GC()
	debug.FreeOSMemory()
	rssBefore := procRSS()

	// Probe: a status read every 50 ms, timed.
	stop := make(chan struct{})
	var probeWG sync.WaitGroup
	var latMu sync.Mutex
	// lats are the status read times per phase: 0 idle (before any
	// connection), 1 opening the connections, 2 under load.
	var lats [3][]time.Duration
	var phase atomic.Int32
	var slowest []string // status reads over 100 ms, with when they started
	soakStart := time.Now()
	var probeErrs atomic.Int64
	probeWG.Add(1)
	go func() {
		defer probeWG.Done()
		hc := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			resp, err := hc.Get(base + "/v1/threads/" + threads[0])
			if err != nil {
				probeErrs.Add(1)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				probeErrs.Add(1)
				continue
			}
			d := time.Since(start)
			latMu.Lock()
			lats[phase.Load()] = append(lats[phase.Load()], d)
			if d > 100*time.Millisecond {
				slowest = append(slowest, fmt.Sprintf("%v at +%v", d.Round(time.Millisecond), start.Sub(soakStart).Round(100*time.Millisecond)))
			}
			latMu.Unlock()
		}
	}()
	// RSS sampler.
	var peak atomic.Int64
	probeWG.Add(1)
	go func() {
		defer probeWG.Done()
		for {
			peak.Store(max(peak.Load(), procRSS()))
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()

	// A baseline of the status read on this machine, idle.
	time.Sleep(2 * time.Second) // let the probe sample; not an assertion
	phase.Store(1)

	// Open the connections, 64 dials at a time.
	var connMu sync.Mutex
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var slow []net.Conn
	dial := func(n int, open func(i int, c net.Conn)) {
		sem := make(chan struct{}, 64)
		var wg sync.WaitGroup
		for i := range n {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Errorf("dial %d: %v", i, err)
					return
				}
				connMu.Lock()
				conns = append(conns, c)
				connMu.Unlock()
				open(i, c)
			}()
		}
		wg.Wait()
	}
	dialStart := time.Now()
	var readBytes atomic.Int64
	dial(nThreads*perThread, func(i int, c net.Conn) {
		th := i % nThreads
		if th >= nThreads/2 {
			c.(*net.TCPConn).SetReadBuffer(4096)
		}
		fmt.Fprintf(c, "GET /v1/threads/%s/events HTTP/1.1\r\nHost: %s\r\n\r\n", threads[th], addr)
		if th < nThreads/2 {
			go func() {
				buf := make([]byte, 4<<10)
				for {
					n, err := c.Read(buf)
					readBytes.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	})
	poll(t, "every stream to subscribe", func() bool {
		e.rt.hub.mu.Lock()
		defer e.rt.hub.mu.Unlock()
		return e.rt.hub.total == nThreads*perThread
	})
	rssStreams := procRSS()
	dial(nSlow, func(i int, c net.Conn) {
		fmt.Fprintf(c, "POST /v1/threads/%s/messages HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"text\":\"", threads[i%nThreads], addr)
		connMu.Lock()
		slow = append(slow, c)
		connMu.Unlock()
	})
	t.Logf("opened %d streams and %d slow bodies in %v", nThreads*perThread, nSlow, time.Since(dialStart).Round(time.Millisecond))
	rssOpen := procRSS()
	phase.Store(2)

	// Publish: 4 KiB events to the read threads, 64 KiB to the stalled
	// ones, ten a second each; trickle a byte a second on every slow body.
	small := Event{Type: EventTextDelta, Data: []byte(`"` + strings.Repeat("s", 4<<10) + `"`)}
	big := Event{Type: EventTextDelta, Data: []byte(`"` + strings.Repeat("b", 64<<10) + `"`)}
	pubEnd := time.Now().Add(publishFor)
	tick := time.NewTicker(100 * time.Millisecond)
	lastTrickle := time.Now()
	published := 0
	for time.Now().Before(pubEnd) {
		<-tick.C
		for i, th := range threads {
			ev := small
			if i >= nThreads/2 {
				ev = big
			}
			ev.ThreadID = th
			e.rt.hub.publish(ev)
			published++
		}
		if time.Since(lastTrickle) >= time.Second {
			lastTrickle = time.Now()
			for _, c := range slow {
				c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				c.Write([]byte("x"))
			}
		}
	}
	tick.Stop()
	stalledLeft := 0
	readersLeft := 0
	for i, th := range threads {
		if i >= nThreads/2 && e.rt.hub.subscribed(th) {
			stalledLeft++
		}
		if i < nThreads/2 && e.rt.hub.subscribed(th) {
			readersLeft++
		}
	}
	rssEnd := procRSS()
	close(stop)
	probeWG.Wait()

	latMu.Lock()
	defer latMu.Unlock()
	for i := range lats {
		slices.Sort(lats[i])
		if len(lats[i]) == 0 {
			t.Fatalf("no status read succeeded in phase %d", i)
		}
	}
	pctOf := func(i int, p float64) time.Duration {
		return lats[i][min(len(lats[i])-1, int(float64(len(lats[i]))*p))].Round(10 * time.Microsecond)
	}
	for i, name := range []string{"idle", "opening 7,000 connections", "under load"} {
		t.Logf("status reads %s: %d, p50 %v, p90 %v, p99 %v, max %v", name, len(lats[i]), pctOf(i, 0.5), pctOf(i, 0.9), pctOf(i, 0.99), pctOf(i, 1))
	}
	pct := func(p float64) time.Duration { return pctOf(2, p) }
	n := len(lats[2])
	e.rt.hub.mu.Lock()
	dropped := e.rt.hub.dropped
	e.rt.hub.mu.Unlock()
	t.Logf("status reads failed: %d", probeErrs.Load())
	t.Logf("status reads over 100 ms: %v", slowest)
	t.Logf("RSS: before %d MiB, with the 2,000 streams %d MiB, with the 5,000 slow bodies too %d MiB, peak %d MiB, end %d MiB",
		rssBefore>>20, rssStreams>>20, rssOpen>>20, peak.Load()>>20, rssEnd>>20)
	t.Logf("published %d events; readers received %d MiB; %d stalled subscribers dropped; threads with a stalled stream left: %d; read threads still streaming: %d/%d",
		published, readBytes.Load()>>20, dropped, stalledLeft, readersLeft, nThreads/2)

	if stalledLeft != 0 {
		t.Errorf("%d threads still have a stalled (never-reading) subscriber", stalledLeft)
	}
	if readersLeft != nThreads/2 {
		t.Errorf("only %d of %d read threads still stream", readersLeft, nThreads/2)
	}
	// Bounds for a 2-core machine shared with other work; see the logged
	// idle baseline for what the machine itself allows.
	if p50 := pct(0.5); p50 > 100*time.Millisecond {
		t.Errorf("status read p50 under load %v, want under 100 ms", p50)
	}
	if p99 := pct(0.99); p99 > 3*time.Second {
		t.Errorf("status read p99 under load %v, want under 3 s", p99)
	}
	_ = n
	if probeErrs.Load() > 0 {
		t.Errorf("%d status reads failed", probeErrs.Load())
	}
	// The bound stated in docs: 512 MiB over the idle runtime.
	if grow := peak.Load() - rssBefore; grow > 512<<20 {
		t.Errorf("RSS grew by %d MiB, over the 512 MiB bound", grow>>20)
	}
}
