package mcp

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
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

// startTasks starts a bridge to the hand-written task server.
func startTasks(t *testing.T, mut func(*Options)) (*fixture, string) {
	t.Helper()
	dir := t.TempDir()
	opts := taskServerOptions(dir)
	if mut != nil {
		mut(&opts)
	}
	return startBridge(t, &opts), dir
}

func countResults(c *raptest.Call) (results, views int) {
	for _, m := range c.Messages() {
		switch v := m.(type) {
		case *rap.ToolResult:
			results++
		case *rap.ViewUpdate:
			if v.ViewType == ProgressViewType {
				views++
			}
		}
	}
	return results, views
}

// taskFiles lists the files of dir whose names end with suffix.
func taskFiles(dir, suffix string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "task-*"+suffix))
	return m
}

// A tool the server runs as a task is polled with
// tasks/get until it completes; its status messages become progress view
// updates and tasks/result becomes the one result. A tool without
// taskSupport on the same server is called plainly.
func TestTaskPolledToResult(t *testing.T) {
	f, dir := startTasks(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "slow", map[string]any{"ms": 400})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != "result of slow" {
		t.Fatalf("result = %q", res.ModelText())
	}
	results, views := countResults(c)
	if results != 1 || views == 0 {
		t.Errorf("%d results and %d progress view updates, want 1 and some", results, views)
	}
	if got := len(taskFiles(dir, ".results")); got != 1 {
		t.Errorf("tasks/result fetched for %d tasks, want 1", got)
	}
	if res := f.call(t, "plain", map[string]any{}); res.ModelText() != "plain ok" {
		t.Errorf("plain tool = %q", res.ModelText())
	}
}

// notifications/tasks/status wakes the poller: a task
// whose server suggests polling once a minute (clamped to 30 s, longer
// than the test's deadline) ends as soon as the server reports it.
func TestTaskStatusNotificationWakesPoller(t *testing.T) {
	f, _ := startTasks(t, nil)
	if res := f.call(t, "notify", map[string]any{"ms": 200}); res.ModelText() != "result of notify" {
		t.Errorf("result = %q", res.ModelText())
	}
}

// A hostile or buggy server: every case ends in one
// "Error:" result that says what happened, never a pending call.
func TestTaskHostileServer(t *testing.T) {
	f, _ := startTasks(t, nil)
	cases := map[string]string{
		"ghost":     "JSON-RPC error -32602",   // unknown task id
		"malformed": "cannot read",             // tasks/get answers a string
		"big":       "over the bridge's limit", // a 5 MiB result
	}
	ctx := ctxT(t)
	calls := map[string]*raptest.Call{}
	for tool := range cases {
		c, err := f.rt.Invoke(ctx, f.url, tool, map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		calls[tool] = c
	}
	for tool, want := range cases {
		res, err := calls[tool].Result(ctx)
		if err != nil {
			t.Errorf("%s: %v", tool, err)
			continue
		}
		if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, want) {
			t.Errorf("%s: result = %.200q, want an Error: with %q", tool, res.Text, want)
		}
		if n, _ := countResults(calls[tool]); n != 1 {
			t.Errorf("%s: %d results", tool, n)
		}
	}
}

// A task that never ends is bounded by the task timeout:
// the bridge sends tasks/cancel and ends the call with an "Error:" result.
func TestTaskNeverEndsTimesOut(t *testing.T) {
	f, dir := startTasks(t, func(o *Options) { o.TaskTimeout = 500 * time.Millisecond })
	res := f.call(t, "never", map[string]any{})
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "did not finish within 500ms") {
		t.Errorf("result = %q", res.Text)
	}
	if len(taskFiles(dir, ".cancelled")) != 1 {
		t.Errorf("the timed-out task got no tasks/cancel: %v", taskFiles(dir, ".cancelled"))
	}
}

// /cancel_tool_call of a task-based call sends
// tasks/cancel and ends the call with one "Error:" result.
func TestTaskCancelSendsTasksCancel(t *testing.T) {
	f, dir := startTasks(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "never", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to start", func() bool { _, v := countResults(c); return v > 0 })
	if err := c.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "cancelled") {
		t.Errorf("result = %q", res.Text)
	}
	waitFor(t, "tasks/cancel at the server", func() bool { return len(taskFiles(dir, ".cancelled")) == 1 })
}

// killBridgeMidTask runs a bridge to the task server in a process of its
// own with a durable store, invokes tool through it, SIGKILLs it once the
// task reported progress, and starts a new bridge on the same store in
// this process. It returns the call and the task server's directory.
func killBridgeMidTask(t *testing.T, tool string, args any) (*raptest.Call, *durable.Store, string) {
	c, st, dir, _, _ := killBridgeMidTaskURL(t, tool, args)
	return c, st, dir
}

// killBridgeMidTaskURL is killBridgeMidTask that also returns the URL the
// bridges listen at and a graceful stop of the new bridge.
func killBridgeMidTaskURL(t *testing.T, tool string, args any) (c *raptest.Call, st *durable.Store, dir, url string, stop func()) {
	t.Helper()
	dir = t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envTaskBridge+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the bridge helper did not start: %v", err)
	}
	url = strings.TrimSpace(line)
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	ctx := ctxT(t)
	c, err = rt.Invoke(ctx, url, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task's first progress update", func() bool { _, v := countResults(c); return v > 0 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	st, err = durable.Open(filepath.Join(dir, "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	stop = startTaskBridgeAt(t, url, st, dir)
	return c, st, dir, url, stop
}

// startTaskBridgeAt starts a bridge to the task server in dir on the
// store st, listening at url (where a bridge before it listened, as a
// restarted bridge does). stop shuts it down gracefully.
func startTaskBridgeAt(t *testing.T, url string, st *durable.Store, dir string) (stop func()) {
	t.Helper()
	opts := taskServerOptions(dir)
	opts.Server = &rap.ServerOptions{Store: st}
	b, err := New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	waitFor(t, "the address of the previous bridge to be free", func() bool {
		ln, err = net.Listen("tcp", strings.TrimPrefix(url, "http://"))
		return err == nil
	})
	hs := &http.Server{Handler: b}
	go func() { _ = hs.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = b.Shutdown(sctx)
			_ = hs.Shutdown(sctx)
		})
	}
	t.Cleanup(stop)
	return stop
}

// drained reports whether st holds no task record and no message to send:
// nothing more is on its way to the runtime.
func drained(st *durable.Store) bool {
	recs, err := st.ListSubscriptions(context.Background())
	n, perr := st.PendingCount(context.Background())
	return err == nil && perr == nil && len(recs) == 0 && n == 0
}

// A task-based call survives a SIGKILL of the bridge mid-task: the bridge started again on the same durable
// store resumes polling and delivers exactly one result.
func TestTaskSurvivesBridgeSIGKILL(t *testing.T) {
	c, st, dir := killBridgeMidTask(t, "slow", map[string]any{"ms": 3000})
	ctx := ctxT(t)
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != "result of slow" {
		t.Fatalf("result after the restart = %q", res.ModelText())
	}
	// Exactly one result: once the record is forgotten and the outbox is
	// empty, nothing else (such as the journal's "the tool server
	// stopped" error) is on its way.
	waitFor(t, "the task record to be forgotten and the outbox drained", func() bool { return drained(st) })
	if n, _ := countResults(c); n != 1 {
		t.Errorf("%d results, want exactly 1", n)
	}
	if got := len(taskFiles(dir, ".results")); got != 1 {
		t.Errorf("tasks/result fetched %d times, want 1", got)
	}
}

// /cancel_tool_call of a call whose task was resumed
// after a restart (the RAP server no longer knows it) sends tasks/cancel
// and ends the call with one "Error:" result.
func TestTaskResumedThenCancelled(t *testing.T) {
	c, st, dir := killBridgeMidTask(t, "never", map[string]any{})
	ctx := ctxT(t)
	_, before := countResults(c)
	waitFor(t, "progress from the resumed task", func() bool { _, v := countResults(c); return v > before })
	if err := c.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "cancelled") {
		t.Errorf("result = %q", res.Text)
	}
	waitFor(t, "tasks/cancel at the server", func() bool { return len(taskFiles(dir, ".cancelled")) == 1 })
	waitFor(t, "the store drained", func() bool { return drained(st) })
	if n, _ := countResults(c); n != 1 {
		t.Errorf("%d results, want exactly 1", n)
	}
}

// A resumed task stays stored through a graceful stop of
// the bridge (no result, no tasks/cancel) and the next start delivers its
// one result.
func TestTaskResumedSurvivesGracefulStop(t *testing.T) {
	c, st, dir, url, stop := killBridgeMidTaskURL(t, "slow", map[string]any{"ms": 4000})
	_, before := countResults(c)
	waitFor(t, "progress from the resumed task", func() bool { _, v := countResults(c); return v > before })
	stop()
	recs, err := st.ListSubscriptions(context.Background())
	if err != nil || len(recs) != 1 {
		t.Fatalf("stored records after a graceful stop = %d, %v; want the task's", len(recs), err)
	}
	if n, _ := countResults(c); n != 0 || len(taskFiles(dir, ".cancelled")) != 0 {
		t.Fatalf("a graceful stop sent %d results, cancelled %d tasks; want none", n, len(taskFiles(dir, ".cancelled")))
	}
	startTaskBridgeAt(t, url, st, dir)
	res, err := c.Result(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != "result of slow" {
		t.Fatalf("result = %q", res.ModelText())
	}
	waitFor(t, "the store drained", func() bool { return drained(st) })
	if n, _ := countResults(c); n != 1 {
		t.Errorf("%d results, want exactly 1", n)
	}
}
