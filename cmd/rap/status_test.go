package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// napScript sleeps an hour when told "nap".
const napScript = `{"turns": [
  {"after_user": "nap", "tool_calls": [{"name": "sleep", "arguments": {"seconds": 3600}}]},
  {"text": "ok", "repeat": true}
]}`

// rap status against a running rap serve with a tokens file: it prints a
// table of the threads waiting longest (the thread, its session's title,
// its state, what it waits on, how long, the last error) or says none
// waits; --json prints GET /v1/waiting's answer; a token bound to a user
// lists that user's threads only; a bad --limit is status 2 and a
// missing token status 1.
func TestStatusVerb(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.toml")
	admin := tokenAdd(t, file, "--admin")
	ada := tokenAdd(t, file, "--user", "ada")
	bobToken := tokenAdd(t, file, "--user", "bob")
	s := baseSettings(t, "scripted:"+writeScript(t, dir, napScript), writeConfig(t, dir))
	s.TokensFile = file
	info, _, _, _ := runningServe(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	code, stdout, stderr := runVerb(t, ctx, "status", "--server", info.URL, "--token", admin)
	if code != exitOK || !strings.Contains(stdout, "no thread is waiting") {
		t.Fatalf("rap status with nothing waiting: status %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}

	c := rapClient(t, info.URL, ada)
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, th.ID, "nap"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, stdout, stderr = runVerb(t, ctx, "status", "--server", info.URL, "--token", admin)
		if strings.Contains(stdout, th.ID) && strings.Contains(stdout, "waiting_timer") { // its turn over
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rap status never listed the sleeping thread: status %d\nstdout %q\nstderr %q", code, stdout, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != exitOK || len(lines) != 2 {
		t.Fatalf("rap status: status %d, want 0 and a header and one line:\n%s", code, stdout)
	}
	for _, col := range []string{"THREAD", "SESSION", "STATE", "WAITING ON", "SINCE", "LAST ERROR"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q lacks %q", lines[0], col)
		}
	}
	for _, want := range []string{th.ID, "nap", "waiting_timer", "timer of sleep, due in ", "s ago", " -"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %q", lines[1], want)
		}
	}

	code, stdout, stderr = runVerb(t, ctx, "status", "--json", "--limit", "5", "--server", info.URL, "--token", ada)
	var resp api.WaitingResponse
	if err := json.Unmarshal([]byte(stdout), &resp); code != exitOK || err != nil {
		t.Fatalf("rap status --json: status %d, %v\nstdout %q\nstderr %q", code, err, stdout, stderr)
	}
	if len(resp.Threads) != 1 || resp.Threads[0].ThreadID != th.ID || resp.Threads[0].UserID != "ada" ||
		len(resp.Threads[0].WaitingOn) != 1 || resp.Threads[0].WaitingOn[0].Kind != api.WaitTimer || resp.Threads[0].WaitingOn[0].Due.IsZero() {
		t.Errorf("rap status --json for ada = %+v, want her sleeping thread waiting on a timer", resp)
	}

	code, stdout, _ = runVerb(t, ctx, "status", "--server", info.URL, "--token", bobToken)
	if code != exitOK || strings.Contains(stdout, th.ID) || !strings.Contains(stdout, "no thread is waiting") {
		t.Errorf("rap status for bob: status %d, stdout %q; want none of ada's threads", code, stdout)
	}
	code, _, stderr = runVerb(t, ctx, "status", "--server", info.URL)
	if code != exitFailure || !strings.Contains(stderr, "401") {
		t.Errorf("rap status without a token: status %d, stderr %q; want 1 saying 401", code, stderr)
	}
	for _, limit := range []string{"0", "201"} {
		code, _, stderr = runVerb(t, ctx, "status", "--server", info.URL, "--limit", limit)
		if code != exitUsage || !strings.Contains(stderr, "--limit "+limit) {
			t.Errorf("rap status --limit %s: status %d, stderr %q; want 2 naming the limit", limit, code, stderr)
		}
	}
}

// rap status names each kind of wait: a child thread its parent waits
// on, a subscription, a tool, a retry with the error another process
// recorded.
func TestPrintWaitingNamesEveryKindOfWait(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	resp := &api.WaitingResponse{AsOf: now, Threads: []api.WaitingThread{
		{ThreadID: "th-child", ParentID: "th-root", RootID: "th-root", State: api.StateWaitingTools, Since: now.Add(-time.Hour),
			WaitingOn: []api.WaitItem{{Kind: api.WaitTool, Toolset: "jobs", Tool: "job", CallID: "call-1", Since: now.Add(-time.Hour)}}},
		{ThreadID: "th-root", RootID: "th-root", State: api.StateWaitingChildren, Since: now.Add(-time.Hour),
			WaitingOn: []api.WaitItem{{Kind: api.WaitChildren, ThreadID: "th-child", Since: now.Add(-time.Hour)}}},
		{ThreadID: "th-watch", RootID: "th-watch", State: api.StateWaitingTools, Since: now.Add(-30 * time.Minute),
			WaitingOn: []api.WaitItem{{Kind: api.WaitSubscription, Tool: "watch", CallID: "call-2", Since: now.Add(-30 * time.Minute)}}},
		{ThreadID: "th-failed", RootID: "th-failed", State: api.StateFailed, Since: now.Add(-time.Minute), LastError: "model unavailable (HTTP 529)",
			WaitingOn: []api.WaitItem{{Kind: api.WaitRetry, Since: now.Add(-time.Minute), Due: now.Add(time.Hour)}}},
	}}
	var b strings.Builder
	printWaiting(&b, resp)
	out := b.String()
	for _, want := range []string{"tool jobs/job (call call-1) [child of th-root]", "waiting_children", "child thread th-child",
		"subscription watch (call call-2)", "a retry, due in 1h00m", "model unavailable (HTTP 529)"} {
		if !strings.Contains(out, want) {
			t.Errorf("rap status's table lacks %q:\n%s", want, out)
		}
	}
}
