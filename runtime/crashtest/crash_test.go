package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	apitypes "github.com/gorap/gorap/runtime/api"
	rapclient "github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// Workload shape. The test takes about 30-60 s on a busy 2-core machine.
const (
	numThreads   = 20
	numKills     = 5
	settleWithin = 90 * time.Second
)

// script answers every user message with one call of the "work" tool and
// every tool result with "done", instantly (every turn repeats).
const script = `{"turns": [
  {"when": {"last_input": "user"}, "tool_calls": [{"name": "work", "arguments": {}}], "repeat": true},
  {"when": {"last_input": "tool_result"}, "text": "done", "repeat": true}
]}`

// invocation is what the tool server saw of one invocation.
type invocation struct {
	thread, id, callbackURL string
}

// toolServer is a RAP tool server built with the SDK: "work" records the
// invocation, waits a random short time and answers. The SDK's sender
// retries the result until the (restarted) runtime accepts it.
type toolServer struct {
	mu    sync.Mutex
	seen  map[string]int // thread/id → invocations
	calls []invocation
	srv   *rap.Server
	http  *httptest.Server
}

func newToolServer(t *testing.T, seed uint64) *toolServer {
	ts := &toolServer{seen: map[string]int{}}
	rng := rand.New(rand.NewPCG(seed, 7))
	var rngMu sync.Mutex
	ts.srv = rap.NewServer("crash", &rap.ServerOptions{
		Description: "Answers after a random short delay.",
		Workers:     128,
		Queue:       8192,
		Retry:       rap.RetryPolicy{Initial: 50 * time.Millisecond, Max: 400 * time.Millisecond},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	rap.AddTool(ts.srv, &rap.Tool{
		Name:        "work",
		Description: "Does a little work.",
		InputSchema: rap.EmptyObjectSchema,
	}, func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
		inv := c.Invocation
		ts.mu.Lock()
		ts.seen[inv.GroupID+"/"+inv.ID]++
		ts.calls = append(ts.calls, invocation{inv.GroupID, inv.ID, inv.CallbackURL})
		ts.mu.Unlock()
		rngMu.Lock()
		d := time.Duration(rng.IntN(40)) * time.Millisecond
		rngMu.Unlock()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return rap.Text("result of " + inv.ID), nil
	})
	if err := ts.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts.http = httptest.NewServer(ts.srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ts.srv.Shutdown(ctx)
		ts.http.Close()
	})
	return ts
}

func (ts *toolServer) snapshot() (map[string]int, []invocation) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	seen := make(map[string]int, len(ts.seen))
	for k, v := range ts.seen {
		seen[k] = v
	}
	return seen, append([]invocation(nil), ts.calls...)
}

// buildRap builds the rap command into dir.
func buildRap(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "rap")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gorap/gorap/cmd/rap").CombinedOutput()
	if err != nil {
		t.Fatalf("go build rap: %v\n%s", err, out)
	}
	return bin
}

// serveProcess is one run of "rap serve".
type serveProcess struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// startServeWith runs "rap serve" listening on listen, with the model
// modelSpec and extra environment variables (NAME=value), and waits until
// it prints its URL, which it returns.
func startServeWith(t *testing.T, bin, listen, dataDir, cfg, modelSpec string, env []string, logPath string) (*serveProcess, string) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", listen, "--data-dir", dataDir, "--config", cfg, "--model", modelSpec, "--log-level", "warn")
	cmd.Env = append(append(os.Environ(), "RAP_TOKEN=", "RAP_PUBLIC_URL=", "RAP_TOOL_TOKEN="), env...)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, log: logf, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		pw.Close()
		logf.Close()
		close(p.done)
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "rap serve: listening on "); ok {
				urls <- u
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case u := <-urls:
		return p, u
	case <-p.done:
		t.Fatalf("rap serve exited before listening; log %s:\n%s", logPath, tail(logPath))
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("rap serve did not listen within 60s; log:\n%s", tail(logPath))
	}
	return nil, ""
}

func (p *serveProcess) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *serveProcess) stop(t *testing.T) {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
		t.Errorf("rap serve did not stop within 30s of SIGINT")
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// client is a small client of the runtime's API with a short timeout, so
// requests to a killed server fail fast.
var client = &http.Client{Timeout: 5 * time.Second}

func post(url string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	resp, err := client.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// apiClient returns a client of the runtime's API at base with the short
// timeout of client.
func apiClient(t *testing.T, base string) *rapclient.Client {
	t.Helper()
	c, err := rapclient.New(base, rapclient.WithHTTPClient(client))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// threadLog is what the workload knows about one thread's messages.
type threadLog struct {
	mu       sync.Mutex
	accepted []string // answered 2xx: must appear exactly once
	maybe    []string // no answer (server killed mid-request): at most once
}

// TestSIGKILLDuringBusyWorkload kills one rap serve on SQLite with SIGKILL
// at random moments of a busy workload and restarts it: each accepted
// message appears once, no turn is half-written, every call gets one result.
func TestSIGKILLDuringBusyWorkload(t *testing.T) { crashWorkload(t, 1, nil) }

// TestSIGKILLDuringBusyWorkloadPostgres is the crash test on PostgreSQL
// with failover: 3 rap serve processes on one database
// (--store via RAP_STORE), messages sent to any of them, a random one
// SIGKILLed and restarted repeatedly. The threads a killed process held
// move on once its leases expire (15 s); every check of the SQLite run
// holds: each accepted message once, no half-written turn, every thread
// settles.
func TestSIGKILLDuringBusyWorkloadPostgres(t *testing.T) {
	crashWorkload(t, 3, []string{"RAP_STORE=" + pgtest.URL(t)})
}

// crashWorkload runs the crash test with n rap serve processes (each with
// its own data dir and port) and their extra environment env; n > 1 needs
// a shared store in env.
func crashWorkload(t *testing.T, n int, env []string) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GORAP_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GORAP_CRASH_SEED=%q: want an unsigned integer", s)
		}
		seed = n
	}
	t.Logf("seed %d (reproduce with GORAP_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	dir := t.TempDir()
	bin := buildRap(t, dir)
	tools := newToolServer(t, seed)
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"tool_sets":[{"type":"toolset_server","server_url":%q}]}`, tools.http.URL)), 0o644)
	scriptPath := filepath.Join(dir, "script.json")
	os.WriteFile(scriptPath, []byte(script), 0o644)
	dataDir := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "serve.log")

	procs, bases, listens := make([]*serveProcess, n), make([]string, n), make([]string, n)
	dataDirs := make([]string, n)
	for k := range procs {
		dataDirs[k] = dataDir
		if k > 0 {
			dataDirs[k] = fmt.Sprintf("%s-%d", dataDir, k)
		}
		procs[k], bases[k] = startServeWith(t, bin, "127.0.0.1:0", dataDirs[k], cfg, "scripted:"+scriptPath, env, logPath)
		listens[k] = strings.TrimPrefix(bases[k], "http://") // restarts keep the port: callback URLs point at it
	}
	base := bases[0]
	var procMu sync.Mutex
	defer func() {
		procMu.Lock()
		for _, p := range procs {
			p.kill()
		}
		procMu.Unlock()
		if t.Failed() {
			t.Logf("rap serve log (tail):\n%s", tail(logPath))
		}
	}()

	threads := make([]string, numThreads)
	logs := make([]*threadLog, numThreads)
	api := apiClient(t, base)
	for i := range threads {
		th, err := api.CreateThread(context.Background(), apitypes.CreateThreadRequest{})
		if err != nil {
			t.Fatalf("create thread: %v", err)
		}
		threads[i] = th.ID
		logs[i] = &threadLog{}
	}

	// Posters: each thread gets messages continuously.
	stop := make(chan struct{})
	var posters sync.WaitGroup
	var posted, refused atomic.Int64
	for i := range threads {
		posters.Add(1)
		prng := rand.New(rand.NewPCG(seed, uint64(100+i)))
		go func() {
			defer posters.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(30+prng.IntN(120)) * time.Millisecond):
				}
				text := fmt.Sprintf("t%d-m%d", i, k)
				code, _, err := post(bases[prng.IntN(n)]+"/v1/threads/"+threads[i]+"/messages", map[string]string{"text": text})
				l := logs[i]
				l.mu.Lock()
				switch {
				case err == nil && code/100 == 2:
					l.accepted = append(l.accepted, text)
					posted.Add(1)
				case err == nil && code/100 == 4:
					l.mu.Unlock()
					t.Errorf("message %s refused with %d", text, code)
					return
				default:
					l.maybe = append(l.maybe, text)
					refused.Add(1)
				}
				l.mu.Unlock()
			}
		}()
	}

	// The killer: SIGKILL at random moments, restart on the same data dir.
	for k := 0; k < numKills; k++ {
		time.Sleep(time.Duration(700+rng.IntN(2300)) * time.Millisecond)
		procMu.Lock()
		victim := rng.IntN(n)
		procs[victim].kill()
		killed := time.Now()
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		procs[victim], _ = startServeWith(t, bin, listens[victim], dataDirs[victim], cfg, "scripted:"+scriptPath, env, logPath)
		procMu.Unlock()
		t.Logf("kill %d: SIGKILL after %d accepted messages; serving again after %v", k+1, posted.Load(), time.Since(killed).Round(time.Millisecond))
	}
	time.Sleep(time.Second)
	close(stop)
	posters.Wait()
	t.Logf("%d messages accepted, %d unanswered (server down or killed mid-request)", posted.Load(), refused.Load())
	if posted.Load() < int64(numThreads) {
		t.Fatalf("only %d messages were accepted: the workload did not run", posted.Load())
	}

	// Let everything settle: every accepted message in its history, no
	// call pending, nothing queued.
	deadline := time.Now().Add(settleWithin)
	for i := 0; ; {
		if i == len(threads) {
			break
		}
		info, err := api.Thread(context.Background(), threads[i])
		if err == nil && info.Queued == 0 && len(info.PendingCalls) == 0 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s did not settle within %v: %+v %v", threads[i], settleWithin, info, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	seen, invocations := tools.snapshot()
	histories := map[string][]apitypes.Message{}
	redispatched := 0
	for _, n := range seen {
		if n > 1 {
			redispatched++
		}
	}
	synthetic := 0
	for i, id := range threads {
		msgs, err := api.History(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		histories[id] = msgs
		checkThread(t, id, msgs, logs[i], seen)
		for _, m := range msgs {
			for _, r := range m.ToolResults {
				if !strings.HasPrefix(r.Text, "result of ") {
					synthetic++ // made by the runtime, e.g. a call interrupted by a new message (RAP RT-3)
				}
			}
		}
	}
	t.Logf("%d results made by the runtime instead of the tool (interrupted calls)", synthetic)
	// Every invocation the tool received belongs to a call in its thread's
	// history (RAP RT-1: the turn was persisted before dispatch) and got
	// exactly one result (checked above).
	for _, inv := range invocations {
		if !hasCall(histories[inv.thread], inv.id) {
			t.Errorf("tool was invoked for %s/%s, which is not in the history", inv.thread, inv.id)
		}
	}
	t.Logf("%d invocations, %d calls invoked more than once (re-dispatched after a restart)", len(invocations), redispatched)

	// Replay results after the restarts: every duplicate gets 200 and
	// changes nothing (RAP RE-6).
	replayed := 0
	for i := 0; i < len(invocations) && replayed < 50; i += 1 + len(invocations)/50 {
		inv := invocations[i]
		code, body, err := post(inv.callbackURL, map[string]any{"type": "tool_result", "group_id": inv.thread, "id": inv.id, "text": "replayed duplicate"})
		if err != nil || code != http.StatusOK {
			t.Errorf("duplicate result for %s: %d %s %v, want 200", inv.id, code, body, err)
		}
		replayed++
	}
	time.Sleep(500 * time.Millisecond)
	for _, id := range threads {
		msgs, err := api.History(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != len(histories[id]) {
			t.Errorf("thread %s: replayed duplicates changed the history from %d to %d messages", id, len(histories[id]), len(msgs))
		}
		for _, m := range msgs {
			for _, r := range m.ToolResults {
				if r.Text == "replayed duplicate" {
					t.Errorf("thread %s: a replayed duplicate result was added", id)
				}
			}
		}
	}
	procMu.Lock()
	for _, p := range procs {
		p.stop(t)
	}
	procMu.Unlock()
}

func hasCall(msgs []apitypes.Message, id string) bool {
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.ID == id {
				return true
			}
		}
	}
	return false
}

// checkThread asserts the invariants of one settled thread.
func checkThread(t *testing.T, id string, msgs []apitypes.Message, l *threadLog, invoked map[string]int) {
	t.Helper()
	users := map[string]int{}
	calls := map[string]int{}
	results := map[string]int{}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Errorf("thread %s: message %d has seq %d (gap or reorder)", id, i, m.Seq)
		}
		switch m.Role {
		case apitypes.RoleUser:
			users[m.Text]++
		case apitypes.RoleAssistant:
			// No half-written turn: the text is either empty (a call) or
			// the whole scripted answer.
			if m.Text != "" && m.Text != "done" {
				t.Errorf("thread %s: assistant text %q is not a whole turn", id, m.Text)
			}
			for _, c := range m.ToolCalls {
				calls[c.ID]++
			}
		}
		for _, r := range m.ToolResults {
			results[r.CallID]++
			if calls[r.CallID] == 0 {
				t.Errorf("thread %s: result for %s comes before (or without) its call", id, r.CallID)
			}
			if r.IsError {
				t.Errorf("thread %s: call %s got an error result: %s", id, r.CallID, r.Text)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, text := range l.accepted {
		if users[text] != 1 {
			t.Errorf("thread %s: accepted message %q appears %d times, want exactly once", id, text, users[text])
		}
		delete(users, text)
	}
	for _, text := range l.maybe {
		if users[text] > 1 {
			t.Errorf("thread %s: unanswered message %q appears %d times, want at most once", id, text, users[text])
		}
		delete(users, text)
	}
	for text, n := range users {
		t.Errorf("thread %s: unexpected user message %q (%d times)", id, text, n)
	}
	for c, n := range calls {
		if n != 1 {
			t.Errorf("thread %s: call id %s used %d times", id, c, n)
		}
		if results[c] != 1 {
			t.Errorf("thread %s: call %s has %d results, want exactly 1", id, c, results[c])
		}
		if invoked[id+"/"+c] == 0 {
			t.Errorf("thread %s: call %s was never dispatched to the tool", id, c)
		}
	}
	for c, n := range results {
		if calls[c] == 0 {
			t.Errorf("thread %s: %d result(s) for unknown call %s", id, n, c)
		}
	}
}
