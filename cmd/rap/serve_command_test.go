package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// commandEntry is a toolset_command entry that runs this test binary as
// "rap ARGS..." (see TestRapHelper).
func commandEntry(name string, args ...string) map[string]any {
	return map[string]any{
		"type":    "toolset_command",
		"name":    name,
		"command": []string{os.Args[0], "-test.run=^TestRapHelper$", "-test.count=1"},
		"env":     map[string]string{rapHelperArgsEnv: strings.Join(args, "\n")},
	}
}

func writeEntries(t *testing.T, dir string, entries ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"tool_sets": entries})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "rap.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
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

// killOnFailure kills the program pid at the end of a failed test, so
// that a failure leaves nothing running.
func killOnFailure(t *testing.T, pid int) {
	t.Cleanup(func() {
		if t.Failed() && !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// processGone reports whether no process has the pid any more.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

var startedRE = regexp.MustCompile(`msg="toolset_command started" toolset_command=clock pid=(\d+)`)

// startedPIDs lists the pids of the "clock" program's starts, in order.
func startedPIDs(log string) []int {
	var pids []int
	for _, m := range startedRE.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		pids = append(pids, n)
	}
	return pids
}

// RAP CF-1: rap serve runs a toolset_command program
// (here "rap example get-time", which prints {"port": N} under
// RAP_EMBEDDED), and its tools reach the model; an entry whose program
// exits at once and one whose program does not exist are reported and
// skipped while the other loads; a program killed while serving is
// restarted and its tools work again under the same name; nothing is left
// running once rap serve stops.
func TestServeToolsetCommand(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	cfg := writeEntries(t, dir,
		commandEntry("broken", "no-such-subcommand"),
		map[string]any{"type": "toolset_command", "name": "missing", "command": []string{filepath.Join(dir, "no-such-program")}},
		commandEntry("clock", "example", "get-time"),
	)
	// Each "Tokyo" message calls the tool, in any thread, any number of times.
	script := `{"turns": [
  {"after_user": "Tokyo", "when": {"last_input": "user"}, "tool_calls": [{"name": "get_time_in_zone", "arguments": {"timezone": "Asia/Tokyo"}}], "repeat": true},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}", "repeat": true},
  {"text": "ok", "repeat": true}
]}`
	s := baseSettings(t, "scripted:"+writeScript(t, dir, script), cfg)
	info, stdout, stderr, stop := runningServe(t, s)
	wantLines(t, stdout.String(),
		`rap serve: toolset_command "broken" (`+cfg+`: tool_sets[0]) skipped: `,
		`exited (exit status 2) before printing its port`,
		`rap serve: toolset_command "missing" (`+cfg+`: tool_sets[1]) skipped: cannot run`,
		`rap serve: toolset_command "clock" started (pid `,
		"tool servers: http://clock.cmd.rap.invalid")

	// ask sends a message to the thread (a new one when id is "") and
	// waits for the model's answer, which quotes the tool's result.
	ask := func(id string) string {
		t.Helper()
		if id == "" {
			var th struct {
				ID string `json:"id"`
			}
			th.ID = createThread(t, info.URL)
			id = th.ID
		}
		before := len(getHistoryAuth(t, info.URL, id, ""))
		sendMessage(t, info.URL, id, "Time in Tokyo?")
		defer func() {
			if t.Failed() {
				t.Logf("history of %s: %s", id, jsonString(getHistoryAuth(t, info.URL, id, "")))
			}
		}()
		waitFor(t, "the answer", func() bool {
			msgs := getHistoryAuth(t, info.URL, id, "")
			n := len(msgs)
			return n >= before+4 && strings.Contains(msgs[n-1].Text, "+09:00")
		})
		return id
	}
	first := ask("")

	pids := startedPIDs(stderr.String())
	if len(pids) != 1 {
		t.Fatalf("want one start of clock, got pids %v; log:\n%s", pids, stderr)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "clock to be restarted", func() bool { return len(startedPIDs(stderr.String())) >= 2 })
	wantLines(t, stderr.String(), `msg="toolset_command exited; restarting it" toolset_command=clock pid=`+strconv.Itoa(pids[0]), "signal: killed")
	pids = startedPIDs(stderr.String())
	killOnFailure(t, pids[len(pids)-1])
	ask("")    // a new session reaches the restarted program,
	ask(first) // and so does the session that cached its manifest before the restart

	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, pid := range pids {
		waitFor(t, "pid "+strconv.Itoa(pid)+" to be gone", func() bool { return processGone(pid) })
	}
	wantLines(t, stderr.String(), `msg="toolset_command stopped" toolset_command=clock pid=`+strconv.Itoa(pids[len(pids)-1]))
}

// A "rap serve" process stopped with SIGTERM stops its
// toolset_command programs too (they run in process groups of their own,
// out of reach of the signals sent to rap serve's group).
func TestServeProcessStopsCommands(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	cfg := writeEntries(t, dir, commandEntry("clock", "example", "get-time"))
	p, stderr, err := startServeProcess(t, dir, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--model", "scripted:"+writeScript(t, dir, tokyoScript), "--config", cfg)
	if p == nil {
		t.Fatalf("rap serve: %v\n%s", err, stderr)
	}
	m := regexp.MustCompile(`toolset_command "clock" started \(pid (\d+)`).FindStringSubmatch(p.stdout)
	if m == nil {
		t.Fatalf("no start line for clock in:\n%s", p.stdout)
	}
	pid, _ := strconv.Atoi(m[1])
	killOnFailure(t, pid)
	if processGone(pid) {
		t.Fatalf("pid %d is not running", pid)
	}
	p.stop(t)
	waitFor(t, "the program to be gone", func() bool { return processGone(pid) })
}
