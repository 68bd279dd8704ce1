package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/raptest"
)

// lineWriter is a concurrency-safe buffer that reports the first base URL
// printed to it.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	urls chan string
}

var listeningRE = regexp.MustCompile(`listening on (http://\S+)`)

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, _ := w.buf.Write(p)
	if m := listeningRE.FindStringSubmatch(w.buf.String()); m != nil && w.urls != nil {
		w.urls <- m[1]
		w.urls = nil
	}
	return n, nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startExample runs "rap example" in-process until the test ends, and
// returns the base URL it prints.
func startExample(t *testing.T, args ...string) (url string, stderr *lineWriter, stop func() int) {
	t.Helper()
	url, _, stderr, stop = startExampleOut(t, args...)
	return url, stderr, stop
}

// startExampleOut is startExample that also returns what it prints on
// standard output.
func startExampleOut(t *testing.T, args ...string) (url string, stdout, stderr *lineWriter, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	out := &lineWriter{urls: urls}
	errOut := &lineWriter{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"example"}, args...), out, errOut) }()
	stop = func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(20 * time.Second):
			t.Fatal("rap example did not stop after the interrupt")
			return -1
		}
	}
	select {
	case url = <-urls:
	case code := <-done:
		t.Fatalf("rap example exited with %d before listening; stderr:\n%s", code, errOut)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("rap example printed no URL")
	}
	return url, out, errOut, stop
}

func TestExampleServesAndStops(t *testing.T) {
	url, errOut, stop := startExample(t, "get-time", "--listen", "127.0.0.1:0", "--log-level", "debug")
	ctx := invokeContext(t)
	rt := raptest.NewRuntime()
	defer rt.Close()
	ts, err := rt.Discover(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Name != "gettime" || len(ts.Tools) != 3 {
		t.Errorf("toolset %q with %d tools", ts.Name, len(ts.Tools))
	}
	call, err := rt.Invoke(ctx, url, "get_current_time", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit status %d after the interrupt, want 0; stderr:\n%s", code, errOut.String())
	}
	// RAP TR-7: the callback URL's token is a credential; it never reaches
	// the log.
	token := call.Invocation.CallbackURL[strings.LastIndex(call.Invocation.CallbackURL, "/")+1:]
	if strings.Contains(errOut.String(), token) {
		t.Errorf("the callback token reached the log:\n%s", errOut)
	}
	if _, err := rt.Discover(ctx, url); err == nil {
		t.Error("still serving after the interrupt")
	}
}

func TestExampleTokenAndDataDir(t *testing.T) {
	dir := t.TempDir()
	url, _, stop := startExample(t, "fswatch", "--listen", "127.0.0.1:0", "--token", "tok", "--data-dir", dir)
	defer stop()
	ctx := invokeContext(t)
	rt := raptest.NewRuntime()
	defer rt.Close()
	if _, err := rt.Invoke(ctx, url, "watch_directory", map[string]any{"path": dir}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("invocation without the token: %v, want a 401", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fswatch.db")); err != nil {
		t.Errorf("--data-dir holds no store: %v", err)
	}
}

func TestExampleExecWarnsAndRefusesOpenAddress(t *testing.T) {
	t.Setenv(envToolToken, "")
	url, errOut, stop := startExample(t, "exec", "--listen", "127.0.0.1:0")
	if !strings.Contains(errOut.String(), "WARNING") || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("url %s, stderr:\n%s", url, errOut)
	}
	stop()
	code, _, errStr := runVerb(t, context.Background(), "example", "exec", "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errStr, "without --tool-token") {
		t.Errorf("open address without a token: status %d, stderr:\n%s", code, errStr)
	}
	code, _, errStr = runVerb(t, context.Background(), "example", "gettime", "--log-level", "loud")
	if code != 2 || !strings.Contains(errStr, "--log-level") {
		t.Errorf("bad log level: status %d, stderr:\n%s", code, errStr)
	}
	code, _, errStr = runVerb(t, context.Background(), "example", "nope")
	if code != 2 || !strings.Contains(errStr, "exec, fswatch, get-time, notes") {
		t.Errorf("unknown example: status %d, stderr:\n%s", code, errStr)
	}
}

// rap example notes keeps the notes under --data-dir, reads --peer-token
// from the flag or RAP_NOTES_PEER_TOKEN, and moves a session's notes to
// another notes server when asked to migrate it (RAP MI-1).
func TestExampleNotesMigrate(t *testing.T) {
	t.Setenv(envNotesPeerToken, "shared-secret")
	dirA, dirB := t.TempDir(), t.TempDir()
	urlA, _, stopA := startExample(t, "notes", "--listen", "127.0.0.1:0", "--data-dir", dirA)
	defer stopA()
	urlB, _, stopB := startExample(t, "notes", "--listen", "127.0.0.1:0", "--data-dir", dirB, "--peer-token", "shared-secret")
	defer stopB()
	ctx := invokeContext(t)
	rt := raptest.NewRuntime(raptest.WithDefaultThread("session-1"))
	defer rt.Close()
	result := func(url, tool string, args any) string {
		t.Helper()
		call, err := rt.Invoke(ctx, url, tool, args)
		if err != nil {
			t.Fatal(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	if got := result(urlA, "add_note", map[string]string{"text": "buy milk"}); got != "noted (1 note in this session)" {
		t.Fatalf("add_note = %q", got)
	}
	if files, _ := filepath.Glob(filepath.Join(dirA, "notes", "*.json")); len(files) != 1 {
		t.Errorf("--data-dir holds %v, want the session's notes file under notes/", files)
	}
	if err := rt.Migrate(ctx, urlA, "session-1", urlB); err != nil {
		t.Fatal(err)
	}
	if got := result(urlB, "list_notes", nil); got != "buy milk" {
		t.Errorf("the destination lists %q", got)
	}
	if files, _ := filepath.Glob(filepath.Join(dirA, "notes", "*.json")); len(files) != 0 {
		t.Errorf("the source still holds %v", files)
	}
}

// Without --data-dir the notes live in a temporary directory, removed at
// the stop; --peer-token is refused on the other examples.
func TestExampleNotesTemporaryDirectory(t *testing.T) {
	t.Setenv(envNotesPeerToken, "")
	url, out, errOut, stop := startExampleOut(t, "notes", "--listen", "127.0.0.1:0")
	// The lines after the URL may still be on their way.
	waitFor(t, "the notes lines on stdout", func() bool { return strings.Contains(out.String(), "no --peer-token") })
	m := regexp.MustCompile(`notes in: (\S+) \(removed when it stops`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("stdout does not say where the notes are:\n%s", out)
	}
	ctx := invokeContext(t)
	rt := raptest.NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, url, "add_note", map[string]string{"text": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m[1]); err != nil {
		t.Fatalf("the notes directory %s: %v", m[1], err)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit status %d; stderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the temporary notes directory is still there after the stop: %v", err)
	}

	code, _, errStr := runVerb(t, context.Background(), "example", "get-time", "--peer-token", "x")
	if code != 2 || !strings.Contains(errStr, "--peer-token is for the notes example only") {
		t.Errorf("--peer-token on get-time: status %d, stderr:\n%s", code, errStr)
	}
}
