//go:build unix

package toolsetcmd

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/config"
)

// A call the toolset_command program acknowledged and
// had not answered when it died gets an "Error: ..." tool_result on its
// callback URL, instead of staying pending for ever; a call it answered
// gets nothing more than a duplicate the runtime ignores (RAP RE-6).
func TestCommandCallsInFlightFailOnExit(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program")
	}
	var mu sync.Mutex
	var results []rap.ToolResult
	callbacks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var res rap.ToolResult
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &res); err != nil {
			t.Errorf("callback body %s: %v", body, err)
		}
		mu.Lock()
		results = append(results, res)
		mu.Unlock()
	}))
	defer callbacks.Close()
	// The program's RAP server: it acknowledges invocations and never
	// answers them.
	program := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	}))
	defer program.Close()
	u, _ := url.Parse(program.URL)
	port, _ := strconv.Atoi(u.Port())

	// The program's process: it is killed below.
	sup := New(config.ToolSet{Source: "rap.json: tool_sets[0]", Command: &config.ToolsetCommand{Name: "slow", Argv: []string{sleep, "60"}}},
		t.TempDir(), slog.New(slog.DiscardHandler))
	sup.host = "slow.cmd.rap.invalid"
	cmd := exec.Command(sleep, "60")
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &commandProcess{cmd: cmd, started: time.Now(), exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	sup.proc = p
	sup.port.Store(int32(port))
	go sup.Supervise()
	t.Cleanup(sup.Stop)

	h := sup.Proxy("")
	invoke := func(id string) {
		inv := rap.Invocation{Operation: "wait", ID: id, GroupID: "thread-1", CallID: "c-" + id, CallbackURL: callbacks.URL + "/rap/callback/" + id, Arguments: json.RawMessage(`{}`)}
		body, _ := json.Marshal(inv)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://slow.cmd.rap.invalid/invoke", bytes.NewReader(body)))
		if rec.Code != http.StatusAccepted {
			t.Fatalf("invoke %s: status %d", id, rec.Code)
		}
	}
	invoke("a")
	invoke("b")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two error results", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(results) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.ID] = true
		if r.GroupID != "thread-1" || r.CallID != "c-"+r.ID || !strings.HasPrefix(r.Text, "Error: the tool server \"slow\" stopped") {
			t.Errorf("result = %+v", r)
		}
	}
	if !seen["a"] || !seen["b"] || len(results) != 2 {
		t.Errorf("results for %v, want one each for a and b", seen)
	}
}

// A body longer than the proxy reads to note the call is forwarded
// whole.
func TestNoteInvocationKeepsLongBodies(t *testing.T) {
	big := bytes.Repeat([]byte("x"), maxTrackedInvocationBytes+10)
	r := httptest.NewRequest(http.MethodPost, "http://x.cmd.rap.invalid/invoke", io.NopCloser(bytes.NewReader(big)))
	r.ContentLength = -1
	r = noteInvocation(r)
	got, err := io.ReadAll(r.Body)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("forwarded %d bytes (%v), want %d", len(got), err, len(big))
	}
	if _, ok := r.Context().Value(trackedCallKey{}).(trackedCall); ok {
		t.Error("a body that is no invocation was noted")
	}
}

// waitFor polls cond until it holds or 30s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
