package mcp

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIsPackageLauncher(t *testing.T) {
	for cmd, want := range map[string]bool{
		"npx -y @modelcontextprotocol/server-everything": true,
		"/usr/local/bin/npx.cmd pkg":                     true,
		"uvx mcp-server-fetch":                           true,
		"bunx pkg":                                       true,
		"pnpm dlx pkg":                                   true,
		"yarn --silent dlx pkg":                          true,
		"npm exec -- pkg":                                true,
		"pipx run pkg":                                   true,
		"uv tool run pkg":                                true,
		"uv run server.py":                               false,
		"node dist/index.js":                             false,
		"pnpm run server":                                false,
		"my-mcp-server --npx":                            false,
	} {
		if got := IsPackageLauncher(strings.Fields(cmd)); got != want {
			t.Errorf("IsPackageLauncher(%q) = %v, want %v", cmd, got, want)
		}
	}
}

// A command run by a package launcher gets the longer start-up limit by
// default; a limit that is set is kept.
func TestStartupLimitDefaults(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want time.Duration
	}{
		{Options{Name: "a", Command: []string{"npx", "-y", "pkg"}}, DefaultLauncherConnectTimeout},
		{Options{Name: "b", Command: []string{"my-server"}}, DefaultConnectTimeout},
		{Options{Name: "c", URL: "http://127.0.0.1:1/mcp"}, DefaultConnectTimeout},
		{Options{Name: "d", Command: []string{"uvx", "pkg"}, ConnectTimeout: time.Second}, time.Second},
	} {
		b, err := New(&c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if b.opts.ConnectTimeout != c.want {
			t.Errorf("%s: start-up limit %v, want %v", c.opts.Name, b.opts.ConnectTimeout, c.want)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func shell(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	return sh
}

// A server that exits at once fails the start with an error that quotes
// the end of its standard error.
func TestStartFailureQuotesStderr(t *testing.T) {
	sh := shell(t)
	b, err := New(&Options{Name: "broken", Command: []string{sh, "-c", `echo "starting up" >&2; echo "fatal: MCP_API_KEY is not set" >&2; exit 3`},
		Logger: quietLogger(), Stderr: devNull(t), TerminateWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(context.Background())
	if err == nil {
		t.Fatal("a server that exits at once started")
	}
	for _, want := range []string{`cannot start MCP server "broken"`, "standard error ended with", "fatal: MCP_API_KEY is not set", "starting up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error lacks %q:\n%v", want, err)
		}
	}
	if s := shortError(err).Error(); strings.Contains(s, "MCP_API_KEY") {
		t.Errorf("the error for call results quotes the server's standard error: %s", s)
	}
}

// The quoted standard error of a failed start never shows the values the
// config gives the server in its environment (its secrets).
func TestStartFailureRedactsTheServersEnv(t *testing.T) {
	sh := shell(t)
	const secret = "sk-live-0123456789abcdef"
	b, err := New(&Options{Name: "leaky", Command: []string{sh, "-c", `echo "using key $API_KEY" >&2; exit 3`},
		Env: []string{"API_KEY=" + secret}, Logger: quietLogger(), Stderr: devNull(t), TerminateWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(context.Background())
	if err == nil {
		t.Fatal("a server that exits at once started")
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "using key [redacted]") {
		t.Errorf("start error shows the env value or not the redacted line:\n%v", err)
	}
}

// A server that does not finish starting within its limit fails with an
// error that names the limit and how to raise it and quotes only the
// end (at most 2 KiB) of its standard error; while it starts, the bridge
// logs that it is still starting.
func TestStartupTimeoutExplainsItself(t *testing.T) {
	sh := shell(t)
	old := stillStartingAfter
	stillStartingAfter = 100 * time.Millisecond
	t.Cleanup(func() { stillStartingAfter = old })
	var logs lockedBuffer
	script := `i=0; while [ $i -lt 2000 ]; do echo "downloading part $i" >&2; i=$((i+1)); done; echo "still resolving packages" >&2; exec sleep 30`
	b, err := New(&Options{Name: "slow", Command: []string{sh, "-c", script},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Stderr: devNull(t), ConnectTimeout: 700 * time.Millisecond, TerminateWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(context.Background())
	if err == nil {
		t.Fatal("a server that never answers initialize started")
	}
	msg := err.Error()
	for _, want := range []string{"start-up limit of 700ms", "startup_timeout", "--startup-timeout", "still resolving packages", "downloading part 1999"} {
		if !strings.Contains(msg, want) {
			t.Errorf("start error lacks %q:\n%.3000s", want, msg)
		}
	}
	_, quoted, _ := strings.Cut(msg, "standard error ended with:")
	if strings.Contains(quoted, "downloading part 1\n") || len(quoted) > stderrTailBytes+200 {
		t.Errorf("the quoted standard error is %d bytes, want its last %d at most", len(quoted), stderrTailBytes)
	}
	if !strings.Contains(logs.String(), "still starting") || !strings.Contains(logs.String(), "limit=700ms") {
		t.Errorf("no \"still starting\" log line naming the limit; log:\n%s", logs.String())
	}
}
