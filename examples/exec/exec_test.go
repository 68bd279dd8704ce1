//go:build unix

package exec_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/display"
	"github.com/gorap/gorap/examples/exec"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

func serve(t *testing.T, lim exec.Limits) (context.Context, string, *raptest.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s := exec.NewWithLimits(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler), BearerToken: "tok"}, lim)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	rt := raptest.NewRuntime(raptest.WithBearerToken("tok"))
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := s.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
		rt.Close()
		if errs := rt.Errors(); len(errs) > 0 {
			t.Errorf("the tool sent bad callbacks: %v", errs)
		}
	})
	return ctx, srv.URL, rt
}

// runToEnd invokes run_command and collects every event up to the final one.
func runToEnd(t *testing.T, ctx context.Context, rt *raptest.Runtime, url string, args any) ([]exec.Line, exec.Exit) {
	t.Helper()
	call, err := rt.Invoke(ctx, url, "run_command", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Subscription {
		t.Fatalf("result %q is not a subscription confirmation", res.Text)
	}
	var lines []exec.Line
	for {
		evs, err := call.Events(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		ev := evs[0]
		if !ev.Associative {
			t.Errorf("event %q is not associative", ev.Text)
		}
		if ev.Final {
			var ex exec.Exit
			if err := json.Unmarshal([]byte(ev.Text), &ex); err != nil {
				t.Fatalf("final event %q: %v", ev.Text, err)
			}
			return lines, ex
		}
		var l exec.Line
		if err := json.Unmarshal([]byte(ev.Text), &l); err != nil {
			t.Fatalf("event %q: %v", ev.Text, err)
		}
		lines = append(lines, l)
	}
}

func TestRunStreamsOutputAndExitStatus(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{})
	lines, ex := runToEnd(t, ctx, rt, url, map[string]any{
		"command": "sh", "args": []string{"-c", "echo out1; echo err1 >&2; echo out2; printf tail; exit 3"},
	})
	var out, errs []string
	for _, l := range lines {
		switch l.Stream {
		case "stdout":
			out = append(out, l.Line)
		case "stderr":
			errs = append(errs, l.Line)
		default:
			t.Errorf("stream %q", l.Stream)
		}
	}
	if strings.Join(out, ",") != "out1,out2,tail" || strings.Join(errs, ",") != "err1" {
		t.Errorf("stdout %q, stderr %q", out, errs)
	}
	if ex.ExitCode != 3 || ex.Lines != 4 || ex.Dropped != 0 || ex.TimedOut {
		t.Errorf("exit = %+v", ex)
	}
}

func TestRunArrayFormDirAndEnvironment(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{})
	dir := t.TempDir()
	t.Setenv("GORAP_TEST_SECRET", "hunter2")
	lines, ex := runToEnd(t, ctx, rt, url, map[string]any{
		"command": []string{"sh", "-c", "pwd; env"}, "dir": dir,
	})
	if ex.ExitCode != 0 || len(lines) == 0 {
		t.Fatalf("exit %+v, %d lines", ex, len(lines))
	}
	if got, _ := os.Readlink(lines[0].Line); lines[0].Line != dir && got != dir {
		t.Errorf("pwd = %q, want %q", lines[0].Line, dir)
	}
	for _, l := range lines {
		if strings.Contains(l.Line, "hunter2") {
			t.Errorf("the server's environment leaked: %q", l.Line)
		}
	}
}

func TestRunLimits(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{MaxLines: 5, MaxLineBytes: 100})
	lines, ex := runToEnd(t, ctx, rt, url, map[string]any{
		"command": []string{"sh", "-c", "head -c 1000 /dev/zero | tr '\\0' a; echo; echo short; seq 1 20"},
	})
	if len(lines) != 5 || ex.Lines != 5 || ex.Dropped != 17 {
		t.Fatalf("%d lines, exit %+v; want 5 sent and 17 dropped", len(lines), ex)
	}
	if lines[0].Line != strings.Repeat("a", 100)+exec.TruncatedMark || lines[1].Line != "short" || lines[2].Line != "1" {
		t.Errorf("lines = %q", lines[:3])
	}
}

func TestRunTimeout(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{})
	_, ex := runToEnd(t, ctx, rt, url, map[string]any{"command": "sleep", "args": []string{"30"}, "timeout_seconds": 0.5})
	if !ex.TimedOut || ex.ExitCode != -1 || !strings.Contains(ex.Error, "timeout_seconds") {
		t.Errorf("exit = %+v", ex)
	}
}

// RAP IN-5, RE-4: bad input is refused with an error result before anything
// runs.
func TestRunRejectsBadInput(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{})
	file := t.TempDir() + "/f"
	os.WriteFile(file, nil, 0o600)
	// Passes the checks, but the kernel cannot run it: the failure comes
	// at start, before the subscription is confirmed.
	garbage := t.TempDir() + "/garbage"
	os.WriteFile(garbage, []byte{0x7f, 0x01, 0x02, 0x03}, 0o700)
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "no-such-program-xyz"}, "not found"},
		{map[string]any{"command": "ls -l"}, "without a shell"},
		{map[string]any{"command": "ls", "dir": file}, "not an existing directory"},
		{map[string]any{"command": "ls", "dir": "/no/such/dir"}, "not an existing directory"},
		{map[string]any{"command": garbage}, "could not start garbage"},
	}
	for _, tc := range tests {
		call, err := rt.Invoke(ctx, url, "run_command", tc.args)
		if err != nil {
			t.Fatal(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Subscription || !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, tc.want) {
			t.Errorf("%v: result %+v, want an error naming %q", tc.args, res, tc.want)
		}
		if n := len(call.Messages()); n != 1 {
			t.Errorf("%v: %d messages, want only the error result (RAP IN-4)", tc.args, n)
		}
	}
}

// RAP CA-1: /cancel_tool_call kills the program and its children, and no
// final event follows (RAP SU-4).
func TestRunCancelKillsProcessGroup(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{})
	call, err := rt.Invoke(ctx, url, "run_command", map[string]any{
		"command": []string{"sh", "-c", "sleep 60 & echo $!; wait"},
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := call.Events(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var l exec.Line
	json.Unmarshal([]byte(evs[0].Text), &l)
	pid, err := strconv.Atoi(l.Line)
	if err != nil {
		t.Fatalf("first line %q is not the child's pid", l.Line)
	}
	if !alive(pid) {
		t.Fatalf("child %d not running before the cancel", pid)
	}
	if err := call.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the cancelled command still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for _, m := range call.Messages() {
		if ev, ok := m.(*rap.SubscriptionEvent); ok && ev.Final {
			t.Errorf("a final event was sent after the cancellation: %q", ev.Text)
		}
	}
}

// A background child does not keep the call open, and does not outlive
// the program.
func TestRunKillsLeftoverChildren(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{})
	lines, ex := runToEnd(t, ctx, rt, url, map[string]any{
		"command": []string{"sh", "-c", "sleep 60 & echo $!"}, "timeout_seconds": 30,
	})
	if ex.ExitCode != 0 || ex.TimedOut || len(lines) != 1 {
		t.Fatalf("exit %+v, lines %v", ex, lines)
	}
	pid, err := strconv.Atoi(lines[0].Line)
	if err != nil {
		t.Fatalf("line %q is not a pid", lines[0].Line)
	}
	deadline := time.Now().Add(15 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d outlived the program", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// RAP DS-1, DS-2: the display script renders a command line.
func TestDisplayScript(t *testing.T) {
	ctx, url, rt := serve(t, exec.Limits{})
	ts, err := rt.Discover(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	script := ts.Tools[0].DisplayScript
	for args, want := range map[string]string{
		`{"command":"ls","args":["-l","/tmp"]}`: "$ ls -l /tmp",
		`{"command":["echo","hi"]}`:             "$ echo hi",
	} {
		if got := display.Render(ctx, "run_command", script, json.RawMessage(args)); got != want {
			t.Errorf("display of %s = %q, want %q", args, got, want)
		}
	}
}
