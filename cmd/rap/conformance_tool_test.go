package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/toolsjson/weatherapi/api"
)

// baseURLRE finds where a serving verb says it serves: "… on URL" (rap
// example, bridge otc and toolsjson) or "… tool server at URL" (bridge mcp).
var baseURLRE = regexp.MustCompile(`(?:\bon|tool server at) (https?://127\.0\.0\.1:[0-9]+)`)

// startServing runs a rap verb that serves a tool server in-process until
// the test ends, and returns the loopback base URL it says it serves on.
func startServing(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("rap %s did not stop", strings.Join(args, " "))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := baseURLRE.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("rap %s exited %d before serving\n%s\n%s", strings.Join(args, " "), code, stdout, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rap %s printed no URL\n%s\n%s", strings.Join(args, " "), stdout, stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// conformanceResult is one line of "rap conformance tool --json".
type conformanceResult struct {
	ID     string `json:"id"`
	Level  string `json:"level"`
	Status string `json:"status"`
}

// checkConforms runs "rap conformance tool" against base and fails the
// test, printing the report, when a MUST check fails; it returns the
// results.
func checkConforms(t *testing.T, base string, flags ...string) map[string]conformanceResult {
	return checkConformsExcept(t, base, nil, flags...)
}

// checkConformsExcept is checkConforms that tolerates the failure of the
// checks in allowed (SHOULD checks whose cause lies beyond gorap, such as
// an MCP server's own input schemas).
func checkConformsExcept(t *testing.T, base string, allowed []string, flags ...string) map[string]conformanceResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	junit := filepath.Join(t.TempDir(), "conformance.xml")
	args := append([]string{"conformance", "tool", base, "--json", "--verbose", "--quiet", "--junit", junit}, flags...)
	code, stdout, stderr := runVerb(t, ctx, args...)
	results := map[string]conformanceResult{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r conformanceResult
		if json.Unmarshal([]byte(line), &r) == nil && r.ID != "" {
			results[r.ID] = r
		}
	}
	if code != 0 || len(results) == 0 {
		t.Fatalf("rap conformance tool %s exited %d\n%s\n%s", base, code, stdout, stderr)
	}
	for id, r := range results {
		if r.Status == "fail" && !slices.Contains(allowed, id) {
			t.Errorf("%s (%s) failed; report:\n%s", id, r.Level, stdout)
		}
	}
	count := map[string][]string{}
	for id, r := range results {
		count[r.Status] = append(count[r.Status], id)
	}
	for _, ids := range count {
		slices.Sort(ids)
	}
	t.Logf("%d passed, %d failed %v, %d skipped %v", len(count["pass"]), len(count["fail"]), count["fail"], len(count["skip"]), count["skip"])
	if fi, err := os.Stat(junit); err != nil || fi.Size() == 0 {
		t.Errorf("no JUnit report written: %v", err)
	}
	return results
}

// wantPassed fails the test unless each check passed.
func wantPassed(t *testing.T, results map[string]conformanceResult, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if results[id].Status != "pass" {
			t.Errorf("%s: %q, want pass", id, results[id].Status)
		}
	}
}

// Every example tool server passes every check the kit can run against it
// (RAP TR-2, IN-3, IN-4, TC-2, CA-2 and the rest: docs/conformance.md).
func TestConformanceToolExamples(t *testing.T) {
	clearRAPEnv(t)
	const token = "conformance-token"
	fsDir := t.TempDir()
	cases := []struct {
		name  string
		calls []string
		want  []string // checks that must pass, beyond "no failure"
	}{
		{"get-time", []string{`get_time_in_zone={"timezone":"Europe/Paris"}`, `subscribe_clock={"interval_seconds":0.2}`},
			[]string{"tool.callback.retry-5xx", "tool.close.hostile-ids", "tool.subscription.events", "tool.subscription.cancel", "tool.status.pending", "tool.auth.required",
				"tool.callback.idempotency-key", "tool.callback.traceparent"}},
		{"notes", []string{`add_note={"text":"written by rap conformance"}`}, []string{"tool.migrate.endpoint", "tool.invoke.invalid-arguments"}},
		{"fswatch", []string{`watch_directory={"path":` + strconvQuote(fsDir) + `}`}, []string{"tool.subscription.events", "tool.subscription.cancel"}},
		{"exec", []string{`run_command={"command":"echo","args":["conformance"]}`}, []string{"tool.subscription.final"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			base := startServing(t, "example", c.name, "--listen", "127.0.0.1:0", "--tool-token", token)
			if c.name == "fswatch" {
				touchUntilDone(t, fsDir) // events for the subscription checks
			}
			flags := []string{"--auth", token}
			if c.name == "notes" {
				// The same calls from a file.
				calls := map[string]json.RawMessage{}
				for _, call := range c.calls {
					name, args, _ := strings.Cut(call, "=")
					calls[name] = json.RawMessage(args)
				}
				data, _ := json.Marshal(calls)
				file := filepath.Join(t.TempDir(), "calls.json")
				if err := os.WriteFile(file, data, 0o600); err != nil {
					t.Fatal(err)
				}
				flags = append(flags, "--calls", file)
			} else {
				for _, call := range c.calls {
					flags = append(flags, "--call", call)
				}
			}
			wantPassed(t, checkConforms(t, base, flags...), c.want...)
		})
	}
}

// touchUntilDone writes a file in dir every 200 ms until the test ends.
func touchUntilDone(t *testing.T, dir string) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
				_ = os.WriteFile(filepath.Join(dir, "touched.txt"), []byte(time.Now().String()), 0o600)
			}
		}
	}()
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The RAP faces of the bridges pass every check the kit can run against
// them: OTC (an OXP worker), tools.json (the example bundle) and MCP
// (@modelcontextprotocol/server-everything, from npm).
func TestConformanceToolBridges(t *testing.T) {
	clearRAPEnv(t)
	t.Run("otc", func(t *testing.T) {
		t.Parallel()
		base := startServing(t, "bridge", "otc", miniOXPWorker(t), "--no-auth", "--listen", "127.0.0.1:0", "--tool-token", "otc-token")
		wantPassed(t, checkConforms(t, base, "--auth", "otc-token", "--call", `Calc_Greet={"who":"conformance"}`), "tool.callback.retry-5xx", "tool.invoke.invalid-arguments", "tool.auth.required")
	})
	t.Run("toolsjson", func(t *testing.T) {
		t.Parallel()
		apiSrv := httptest.NewServer(api.Handler(demoKey))
		t.Cleanup(apiSrv.Close)
		dir := copyExampleBundle(t, apiSrv.URL)
		base := startServing(t, "bridge", "toolsjson", dir, "--listen", "127.0.0.1:0", "--no-confirm", "--tool-token", "tj-token")
		wantPassed(t, checkConforms(t, base, "--auth", "tj-token", "--call", `notes_echo={"note":"conformance"}`), "tool.callback.retry-5xx", "tool.invoke.invalid-arguments", "tool.auth.required")
	})
	t.Run("mcp", func(t *testing.T) {
		t.Parallel()
		node, script := npmMCPServer(t, "server-everything")
		base := startServing(t, "bridge", "mcp", "--listen", "127.0.0.1:0", "--tool-token", "mcp-token", "--", node, script, "stdio")
		// server-everything declares its parameterless tools as
		// {"type":"object"}; the bridge passes MCP schemas on unchanged.
		allowed := []string{"tool.toolset.no-params-schema"}
		res := checkConformsExcept(t, base, allowed, "--auth", "mcp-token", "--call", `echo={"message":"conformance"}`, "--call", `get-sum={"a":1,"b":2}`)
		wantPassed(t, res, "tool.callback.retry-5xx", "tool.invoke.invalid-arguments")
	})
}

// Bad flags are usage errors (exit 2) that say what to write instead.
func TestConformanceToolUsage(t *testing.T) {
	ctx := invokeContext(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"conformance", "tool"}, "give the tool server's base URL"},
		{[]string{"conformance", "tool", "127.0.0.1:3001"}, "must start with http:// or https://"},
		{[]string{"conformance", "tool", "http://127.0.0.1:1", "--call", "echo"}, "must be NAME=JSON"},
		{[]string{"conformance", "tool", "http://127.0.0.1:1", "--call", "echo=[1]"}, "must be a JSON object"},
		{[]string{"conformance", "tool", "http://127.0.0.1:1", "--calls", "/nonexistent/calls.json"}, "reading --calls"},
	} {
		code, _, stderr := runVerb(t, ctx, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	// A server that is not there: exit 1, and the report says so.
	code, stdout, _ := runVerb(t, ctx, "conformance", "tool", "http://127.0.0.1:1", "--quiet")
	if code != 1 || !strings.Contains(stdout, "is the server running") {
		t.Errorf("unreachable server: exit %d\n%s", code, stdout)
	}
}
