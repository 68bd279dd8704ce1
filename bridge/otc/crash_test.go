//go:build unix

package otc

// These tests kill a real bridge process with SIGKILL in the middle of a
// call and start another on the same durable store: the RAP runtime must
// get exactly one result for the call, computed once by the worker. The
// bridge process is this test binary run again (TestMain) with
// crashHelperEnv set.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/raptest"
)

// Environment of the helper process.
const (
	crashHelperEnv = "GORAP_OTC_CRASH_HELPER" // the worker's URL
	crashDBEnv     = "GORAP_OTC_CRASH_DB"
)

// crashWait bounds every wait of these tests; passing runs take far less.
const crashWait = 60 * time.Second

func TestMain(m *testing.M) {
	if worker := os.Getenv(crashHelperEnv); worker != "" {
		os.Exit(crashHelper(worker, os.Getenv(crashDBEnv)))
	}
	os.Exit(m.Run())
}

// crashHelper is the bridge process: a bridge to the OXP worker at worker
// with the durable store db, served on a loopback port it prints as
// "listening URL". It runs until it is killed, or shuts down cleanly (its
// outbox delivered) on SIGTERM.
func crashHelper(worker, db string) int {
	st, err := durable.Open(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	b, err := New(ctx, &Options{Name: "crash", Client: &Client{BaseURL: worker, Dialect: DialectOXP},
		AuthPollMin: 10 * time.Millisecond, AuthPollMax: 50 * time.Millisecond, Logger: log,
		Server: &rap.ServerOptions{Store: st, Retry: rap.RetryPolicy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := b.Server().Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go http.Serve(ln, b.Server())
	fmt.Printf("listening http://%s\n", ln.Addr())
	<-term
	sctx, cancel := context.WithTimeout(ctx, crashWait)
	defer cancel()
	if err := b.Server().Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// bridgeProc is a running helper process.
type bridgeProc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startBridgeProc starts a helper on db and waits until it listens.
func startBridgeProc(t *testing.T, worker, db string) *bridgeProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+worker, crashDBEnv+"="+db)
	var stderr lockedBuf
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &bridgeProc{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("bridge process stderr:\n%s", stderr.String())
		}
	})
	select {
	case p.url = <-urls:
	case <-p.done:
		t.Fatalf("the bridge process exited before listening: %s", stderr.String())
	case <-time.After(crashWait):
		t.Fatalf("the bridge process did not listen within %v: %s", crashWait, stderr.String())
	}
	return p
}

// kill ends the process with SIGKILL and waits for it.
func (p *bridgeProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// stop shuts the process down cleanly (its outbox delivered) and waits for
// it to exit 0.
func (p *bridgeProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(crashWait):
		t.Fatalf("the bridge process did not stop within %v", crashWait)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the bridge process exited with %d", code)
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// crashWorker is an OXP worker that deduplicates calls by call_id, as OXP
// 1.0 asks ("Used as an idempotency key"): a call runs once, and a
// repeated request waits for (or gets) the first run's value. Demo.Slow
// runs until release is closed; Demo.Private needs an authorization that
// granted completes (check_url /auth/status).
type crashWorker struct {
	t       *testing.T
	srv     *httptest.Server
	release chan struct{}

	mu       sync.Mutex
	runs     map[string]*workerRun // by call_id
	requests map[string]int        // call requests by call_id
	tokens   map[string]string     // the acme token of each call_id's last request
	polls    int
	granted  bool
}

type workerRun struct {
	runs  int
	done  chan struct{}
	value string
}

func newCrashWorker(t *testing.T) *crashWorker {
	w := &crashWorker{t: t, release: make(chan struct{}), runs: map[string]*workerRun{}, requests: map[string]int{}, tokens: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(rw http.ResponseWriter, r *http.Request) { writeJSON(rw, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /tools", func(rw http.ResponseWriter, r *http.Request) {
		text := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)
		writeJSON(rw, 200, map[string]any{"items": []any{
			map[string]any{"id": "Demo.Slow@1.0.0", "name": "Demo_Slow", "description": "Takes its time.", "version": "1.0.0", "input_schema": text},
			map[string]any{"id": "Demo.Private@1.0.0", "name": "Demo_Private", "description": "Needs the user's account.", "version": "1.0.0",
				"input_schema": json.RawMessage(`{"type":"object"}`), "requirements": map[string]any{"authorization": []any{map[string]string{"id": "acme"}}}},
		}})
	})
	mux.HandleFunc("GET /auth/status", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.polls++
		granted := w.granted
		w.mu.Unlock()
		if granted {
			writeJSON(rw, 200, map[string]string{"status": "completed", "token": "acme-token"})
			return
		}
		writeJSON(rw, 200, map[string]string{"status": "pending"})
	})
	mux.HandleFunc("POST /tools/call", w.call)
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	t.Cleanup(func() {
		select {
		case <-w.release:
		default:
			close(w.release)
		}
	})
	return w
}

func (w *crashWorker) call(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	oxpValidate(w.t, "call request", body)
	var req struct {
		Request struct {
			CallID  string            `json:"call_id"`
			ToolID  string            `json:"tool_id"`
			Input   map[string]string `json:"input"`
			Context struct {
				UserID        string `json:"user_id"`
				Authorization []struct {
					ID    string `json:"id"`
					Token string `json:"token"`
				} `json:"authorization"`
			} `json:"context"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(rw, 400, map[string]string{"message": err.Error()})
		return
	}
	q := req.Request
	w.mu.Lock()
	w.requests[q.CallID]++
	for _, a := range q.Context.Authorization {
		if a.ID == "acme" {
			w.tokens[q.CallID] = a.Token
		}
	}
	granted := w.granted
	run := w.runs[q.CallID]
	if run == nil {
		if q.ToolID == "Demo.Private@1.0.0" && !granted {
			w.mu.Unlock()
			writeJSON(rw, 400, map[string]any{"message": "the tool needs the user's acme account", "missing_requirements": map[string]any{
				"authorization": []any{map[string]string{"id": "acme", "url": w.srv.URL + "/authorize", "check_url": w.srv.URL + "/auth/status"}}}})
			return
		}
		run = &workerRun{done: make(chan struct{})}
		w.runs[q.CallID] = run
		go func() { // the tool runs on whatever happens to the request
			if q.ToolID == "Demo.Slow@1.0.0" {
				<-w.release
				run.value = "slow " + q.Input["text"]
			} else {
				run.value = "private data of " + q.Context.UserID
			}
			w.mu.Lock()
			run.runs++
			w.mu.Unlock()
			close(run.done)
		}()
	}
	w.mu.Unlock()
	select {
	case <-run.done:
	case <-r.Context().Done():
		return
	}
	writeJSON(rw, 200, map[string]any{"result": map[string]any{"call_id": q.CallID, "success": true, "value": run.value}})
}

// count returns f's answer with the worker locked.
func (w *crashWorker) count(f func() int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return f()
}

// checkSettled opens the store of a stopped bridge and checks that no call
// is left to resume and no callback left to send, so that what the
// runtime received is final.
func checkSettled(t *testing.T, db string) {
	t.Helper()
	st, err := durable.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if calls, err := st.UnfinishedCalls(ctx); err != nil || len(calls) != 0 {
		t.Errorf("calls left in the journal: %+v, %v", calls, err)
	}
	if msgs, err := st.Pending(ctx, 10); err != nil || len(msgs) != 0 {
		t.Errorf("callbacks left in the outbox: %d, %v", len(msgs), err)
	}
}

// A bridge killed while the worker runs a call: the restarted bridge sends
// the call again with the same call_id, the worker's idempotency key, so
// the tool runs once, and the runtime gets its value once.
func TestCrashDuringWorkerCallDeliversOneResult(t *testing.T) {
	w := newCrashWorker(t)
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	db := filepath.Join(t.TempDir(), "bridge.db")
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()

	p1 := startBridgeProc(t, w.srv.URL, db)
	call, err := rt.Invoke(ctx, p1.url, "Demo_Slow", map[string]string{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	id := call.Invocation.ID
	waitUntil(t, "the worker to start the call", func() bool { return w.count(func() int { return w.requests[id] }) == 1 })
	p1.kill(t)

	p2 := startBridgeProc(t, w.srv.URL, db)
	waitUntil(t, "the restarted bridge to send the call again", func() bool { return w.count(func() int { return w.requests[id] }) == 2 })
	close(w.release)
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != "slow hello" {
		t.Fatalf("result %q, want the worker's value", res.ModelText())
	}
	p2.stop(t)
	checkSettled(t, db)
	if results, _ := messages(call); results != 1 {
		t.Errorf("the runtime got %d results, want 1", results)
	}
	if runs := w.count(func() int { return w.runs[id].runs }); runs != 1 {
		t.Errorf("the tool ran %d times, want once", runs)
	}
	if errs := rt.Errors(); len(errs) > 0 {
		t.Errorf("callback errors: %v", errs)
	}
}

// A bridge killed while it waits for the user to authorize: the restarted
// bridge goes on checking the authorization (it does not show the link
// again nor call the worker before the check says done), then calls with
// the token the check gave, and the runtime gets one result.
func TestCrashDuringAuthorizationWaitDeliversOneResult(t *testing.T) {
	w := newCrashWorker(t)
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	db := filepath.Join(t.TempDir(), "bridge.db")
	ctx, cancel := context.WithTimeout(context.Background(), crashWait)
	defer cancel()

	p1 := startBridgeProc(t, w.srv.URL, db)
	call, err := rt.Invoke(ctx, p1.url, "Demo_Private", nil, raptest.WithUserID("u-1"))
	if err != nil {
		t.Fatal(err)
	}
	id := call.Invocation.ID
	msg, err := call.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := msg.(*rap.OAuth); !ok || o.AuthURL != w.srv.URL+"/authorize" {
		t.Fatalf("first callback %+v, want the oauth message with the worker's link", msg)
	}
	// The bridge checks the authorization only once it has saved that
	// it waits for it. The kill waits until the oauth message is out of
	// the outbox too: a message delivered but not yet removed when the
	// process dies is sent again by the next (at least once, RAP RE-6),
	// which is not what this test is about.
	st, err := durable.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitUntil(t, "the bridge to check the authorization, the oauth message delivered", func() bool {
		msgs, err := st.Pending(ctx, 1)
		return err == nil && len(msgs) == 0 && w.count(func() int { return w.polls }) > 0
	})
	p1.kill(t)

	p2 := startBridgeProc(t, w.srv.URL, db)
	polls := w.count(func() int { return w.polls })
	waitUntil(t, "the restarted bridge to check the authorization", func() bool { return w.count(func() int { return w.polls }) > polls })
	w.mu.Lock()
	w.granted = true
	w.mu.Unlock()
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != "private data of u-1" {
		t.Fatalf("result %q, want the worker's value", res.ModelText())
	}
	p2.stop(t)
	checkSettled(t, db)
	results, oauth := messages(call)
	if results != 1 || oauth != 1 {
		t.Errorf("the runtime got %d results and %d oauth messages, want 1 and 1", results, oauth)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.requests[id] != 2 || w.tokens[id] != "acme-token" {
		t.Errorf("the worker got %d requests for the call, the last with token %q; want 2 (before and after the authorization), the second with the check's token", w.requests[id], w.tokens[id])
	}
	if errs := rt.Errors(); len(errs) > 0 {
		t.Errorf("callback errors: %v", errs)
	}
}
