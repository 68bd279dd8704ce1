package rap_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// serveWith runs s.Serve on a loopback port until the test ends and
// returns the address.
func serveWith(t *testing.T, opts *rap.ServerOptions) string {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = sdkQuiet()
	}
	s := rap.NewServer("limits_test", opts)
	addEcho(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// closedBy reads from c until the server closes it, and fails the test if
// that takes longer than wait. It returns what the server sent.
func closedBy(t *testing.T, c net.Conn, wait time.Duration) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v (got %q)", wait, got)
	}
	return string(got)
}

// A client that stalls its body past the grace, and one that sends its
// headers slowly, are cut off.
func TestSlowClientsCutOff(t *testing.T) {
	addr := serveWith(t, &rap.ServerOptions{HTTP: rap.HTTPLimits{ReadHeaderTimeout: 200 * time.Millisecond, MinBodyRate: 1000, BodyRateGrace: 200 * time.Millisecond}})
	t.Run("body", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A whole header, then one byte of a 100,000-byte body, then nothing.
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr)
		closedBy(t, c, 10*time.Second) // far above the 200 ms configured
	})
	t.Run("headers", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\n", addr)
		closedBy(t, c, 10*time.Second)
	})
}

// Headers over MaxHeaderBytes get 431.
func TestHeaderLimit(t *testing.T) {
	addr := serveWith(t, &rap.ServerOptions{HTTP: rap.HTTPLimits{MaxHeaderBytes: 4 << 10}})
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+rap.WellKnownPath, nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
	resp, err := (&http.Client{Timeout: sdkWait}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers answered %d, want 431", resp.StatusCode)
	}
}

// When MaxConns connections are open and idle, a new client is served: one
// idle connection makes room (the one idle longest; see
// TestShedPrefersLeastProgress), and the other stays open.
func TestConnectionCap(t *testing.T) {
	addr := serveWith(t, &rap.ServerOptions{HTTP: rap.HTTPLimits{MaxConns: 2}})
	var held []*bufio.Reader
	var conns []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		// Prove it was accepted: it is answered; then it idles, kept alive.
		if err := getOn(c, br, addr); err != nil {
			t.Fatalf("held connection not served: %v", err)
		}
		held, conns = append(held, br), append(conns, c)
	}
	getServed(t, addr) // while two connections idle
	open := 0
	for i, c := range conns {
		_ = c.SetDeadline(time.Now().Add(sdkWait))
		if getOn(c, held[i], addr) == nil {
			open++
		}
	}
	if open != 1 {
		t.Fatalf("%d of the 2 idle connections still serve, want 1: exactly one makes room", open)
	}
}

// getOn sends a discovery request on c and reads its answer.
func getOn(c net.Conn, br *bufio.Reader, addr string) error {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", rap.WellKnownPath, addr); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

// TestHelperSlowBodyServer is the tool server of TestSlowBodyLoad, run in
// a child process so that its memory is measured alone. It serves until
// its standard input closes.
func TestHelperSlowBodyServer(t *testing.T) {
	if os.Getenv("RAP_SLOWBODY_HELPER") == "" {
		t.Skip("a helper process of TestSlowBodyLoad")
	}
	maxConns, _ := strconv.Atoi(os.Getenv("RAP_SLOWBODY_MAXCONNS"))
	s := rap.NewServer("slowbody", &rap.ServerOptions{Logger: sdkQuiet(), HTTP: rap.HTTPLimits{MaxConns: maxConns}})
	addEcho(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Printf("ADDR %s\n", ln.Addr())
	_ = s.Serve(ctx, ln)
}

// rssKiB is the resident set size of process pid.
func rssKiB(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("cannot read the helper's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Skip("no VmRSS in /proc")
	return 0
}

// Load check: 5,000 connections that each send a header and the first
// byte of a large body, then stall, cost the SDK server a bounded amount
// of memory with the default limits. Set
// RAP_SLOWBODY_MAXCONNS=-1 to see the cost without the connection cap, and
// RAP_SLOWBODY_PREFIX=n to send n bytes of each body before stalling.
func TestSlowBodyLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 5,000 connections")
	}
	if raceEnabled {
		// The race detector multiplies the memory of every goroutine and
		// buffer, so an RSS bound says nothing about the real cost.
		t.Skip("measures memory, which the race detector inflates several times")
	}
	const conns = 5000
	maxConns := os.Getenv("RAP_SLOWBODY_MAXCONNS")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSlowBodyServer$", "-test.v")
	cmd.Env = append(os.Environ(), "RAP_SLOWBODY_HELPER=1", "RAP_SLOWBODY_MAXCONNS="+maxConns)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("the helper server did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	pid := cmd.Process.Pid
	// Warm up: one real request, so the baseline includes a served
	// connection's one-time costs.
	if resp, err := http.Get("http://" + addr + rap.WellKnownPath); err == nil {
		resp.Body.Close()
	}
	before := rssKiB(t, pid)

	start := time.Now()
	var (
		mu      sync.Mutex
		held    []net.Conn
		failed  atomic.Int64
		wg      sync.WaitGroup
		next    atomic.Int64
		request = fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"operation\":\"echo\",", addr)
	)
	// RAP_SLOWBODY_PREFIX=n sends n more bytes of the body before stalling.
	if n, _ := strconv.Atoi(os.Getenv("RAP_SLOWBODY_PREFIX")); n > 0 {
		request += `"pad":"` + strings.Repeat("x", n)
	}
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= conns {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(c, request); err != nil {
					failed.Add(1)
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// Let the server take what it will: poll its RSS until it stops growing.
	peak, stable := rssKiB(t, pid), 0
	for deadline := time.Now().Add(10 * time.Second); stable < 5 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if now := rssKiB(t, pid); now > peak {
			peak, stable = now, 0
		} else {
			stable++
		}
	}
	growth := peak - before
	t.Logf("%d slow-body connections (%d failed) opened in %v; helper RSS %d KiB before, %d KiB after: +%.1f MiB (MaxConns=%q, prefix=%q)",
		conns, failed.Load(), time.Since(start).Round(time.Millisecond), before, peak, float64(growth)/1024, maxConns, os.Getenv("RAP_SLOWBODY_PREFIX"))
	if maxConns == "" && os.Getenv("RAP_SLOWBODY_PREFIX") == "" && growth > 100<<10 {
		t.Errorf("5,000 slow bodies cost the server %.1f MiB, over the 100 MiB bound", float64(growth)/1024)
	}
}

// Request bodies being read hold at most
// MaxBodyBytesInFlight together; past it a request gets 503 (retried by
// the runtime, RAP TR-3), and the budget is free again afterwards.
func TestBodyBytesInFlight(t *testing.T) {
	sink := newSDKSink(t)
	addr := serveWith(t, &rap.ServerOptions{MaxBodyBytesInFlight: 64 << 10, Retry: sdkFastRetry})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 100 KiB of a 200 KiB body (under MaxBodyBytes), then nothing.
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{\"pad\":\"%s", addr, strings.Repeat("x", 100<<10))
	_ = c.SetReadDeadline(time.Now().Add(sdkWait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body over the in-flight budget: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("answered %d, want 503 with Retry-After", resp.StatusCode)
	}
	code, body, _ := sdkPost(t, "http://"+addr, sdkInvocation("echo", "call_1", "thread_1", sink.URL(), map[string]any{"text": "hi"}))
	if code != http.StatusOK {
		t.Fatalf("the next invocation answered %d %s; the budget was not given back", code, body)
	}
	if r := sink.result("call_1"); r.Text != "hi" {
		t.Errorf("result %q", r.Text)
	}
}

// The write timeout bounds every answer but /migrate's,
// which may take as long as the migration (RAP MI-1).
func TestMigrateOutlivesWriteTimeout(t *testing.T) {
	addr := serveWith(t, &rap.ServerOptions{
		HTTP: rap.HTTPLimits{WriteTimeout: 100 * time.Millisecond},
		Migrator: func(ctx context.Context, req *rap.MigrateRequest) error {
			select { // a migration slower than the write timeout
			case <-time.After(400 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	code, body, _ := sdkPost(t, "http://"+addr+rap.MigratePath, []byte(`{"session_id":"s1","destination_url":"http://127.0.0.1:1/"}`))
	if code != http.StatusOK {
		t.Fatalf("a migration longer than the write timeout answered %d %q, want 200", code, body)
	}
}
