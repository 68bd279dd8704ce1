package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Start-up of an MCP server that explains itself: a server started by a
// package launcher (npx, uvx...) gets a longer limit, since its first
// start downloads the package; while a start takes long the bridge logs
// that it is still starting; and a failed start says which limit passed,
// how to raise it, and what the server last wrote to its standard error.

// DefaultLauncherConnectTimeout is the default of Options.ConnectTimeout
// for a command run by a package launcher (npx, pnpm dlx, yarn dlx,
// bunx, uvx, pipx run...), whose first start downloads the package.
const DefaultLauncherConnectTimeout = 2 * time.Minute

// stderrTailBytes bounds the end of a stdio server's standard error that
// a failed start quotes.
const stderrTailBytes = 2 << 10

// stillStartingAfter is how long a start runs before the bridge logs
// that the server is still starting, and then how often it logs it
// again; New copies it into the bridge, and tests shorten it.
var stillStartingAfter = 5 * time.Second

// IsPackageLauncher reports whether command runs its program through a
// package launcher that downloads it on first use: npx, pnpx, bunx,
// uvx, "pnpm dlx", "yarn dlx", "bun x", "npm exec", "npm x", "pipx run",
// "uv tool run".
func IsPackageLauncher(command []string) bool {
	if len(command) == 0 {
		return false
	}
	prog := strings.ToLower(baseName(command[0]))
	for _, ext := range []string{".exe", ".cmd", ".bat"} {
		prog = strings.TrimSuffix(prog, ext)
	}
	switch prog {
	case "npx", "pnpx", "bunx", "uvx":
		return true
	}
	var verbs []string // the first arguments that are not flags
	for _, a := range command[1:] {
		if !strings.HasPrefix(a, "-") {
			verbs = append(verbs, a)
			if len(verbs) == 2 {
				break
			}
		}
	}
	first, second := "", ""
	if len(verbs) > 0 {
		first = verbs[0]
	}
	if len(verbs) > 1 {
		second = verbs[1]
	}
	switch prog {
	case "pnpm", "yarn":
		return first == "dlx"
	case "bun":
		return first == "x"
	case "npm":
		return first == "exec" || first == "x"
	case "pipx":
		return first == "run"
	case "uv":
		return first == "tool" && second == "run"
	}
	return false
}

// baseName is the last element of a slash- or backslash-separated path.
func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// defaultConnectTimeout is the start-up limit for a command (nil for a
// URL) when Options.ConnectTimeout is zero.
func defaultConnectTimeout(command []string) time.Duration {
	if IsPackageLauncher(command) {
		return DefaultLauncherConnectTimeout
	}
	return DefaultConnectTimeout
}

// stderrTail copies a stdio server's standard error to where the bridge
// sends it and keeps its last stderrTailBytes.
type stderrTail struct {
	mu   sync.Mutex
	buf  []byte
	done chan struct{} // closed when the server's standard error ends
}

// pipe returns the write end to give the server as its standard error.
// The copy runs on a goroutine of its own, so that waiting for the
// server never waits for a grandchild that still holds the pipe open.
func (t *stderrTail) pipe(dst io.Writer) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t.done = make(chan struct{})
	go func() {
		defer close(t.done)
		defer r.Close()
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			if n > 0 {
				_, _ = dst.Write(b[:n])
				t.keep(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return w, nil
}

func (t *stderrTail) keep(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - stderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

// text waits up to wait for the standard error to end (a server that
// failed is exiting) and returns its last lines, valid UTF-8, at most
// stderrTailBytes.
func (t *stderrTail) text(wait time.Duration) string {
	if t.done != nil {
		timer := time.NewTimer(wait)
		select {
		case <-t.done:
		case <-timer.C:
		}
		timer.Stop()
	}
	t.mu.Lock()
	b := append([]byte(nil), t.buf...)
	t.mu.Unlock()
	full := len(b) < stderrTailBytes
	if !full {
		// Cut where a line starts, unless that loses most of it.
		if i := strings.IndexByte(string(b), '\n'); i >= 0 && i < len(b)/2 {
			b = b[i+1:]
		}
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if !full && s != "" {
		s = "…\n" + s
	}
	return s
}

// startError is a failed start of the MCP server. Error gives the whole
// story for the operator (start-up and log); short leaves out the
// server's standard error, which may say more than the model should see,
// for the error results of calls made while it is down.
type startError struct {
	what   string // "cannot start MCP server …: cause"
	hint   string
	stderr string // the end of the server's standard error, if any
}

func (e *startError) Error() string {
	s := e.what + "; " + e.hint
	if e.stderr != "" {
		s += "\nThe server's standard error ended with:\n" + indent(e.stderr)
	}
	return s
}

func (e *startError) short() string { return e.what }

// shortError is err without a stdio server's standard error.
func shortError(err error) error {
	var se *startError
	if errors.As(err, &se) {
		return errors.New(se.short())
	}
	return err
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// startFailure words a failed connect whose context was ctx: the cause,
// which limit passed and how to raise it, and for a command the end of
// its standard error.
func (b *Bridge) startFailure(ctx context.Context, err error, tail *stderrTail) error {
	se := &startError{what: fmt.Sprintf("cannot start %s: %v", b.describe(), err)}
	switch {
	case errors.Is(context.Cause(ctx), errStartupTimeout):
		se.what = fmt.Sprintf("cannot start %s: it did not finish starting (MCP initialize) within its start-up limit of %v", b.describe(), b.opts.ConnectTimeout)
		se.hint = "if it is slow to start (a first npx or uvx start downloads the package), raise the limit: startup_timeout in its config entry, --startup-timeout for rap bridge mcp"
	case len(b.opts.Command) > 0:
		se.hint = "check that the command exists, runs and speaks MCP on standard input and output"
	default:
		se.hint = "check the URL and headers, and that the server is running"
	}
	if tail != nil {
		if s := tail.text(time.Second); s != "" {
			se.stderr = redactEnv(s, b.opts.Env)
		} else if len(b.opts.Command) > 0 {
			se.hint += "; it wrote nothing to its standard error"
		}
	}
	return se
}

// errStartupTimeout is the cause of a start that passed its limit.
var errStartupTimeout = errors.New("start-up limit passed")

// reportSlowStart logs, from b.stillStartingAfter on and then at that
// interval, that the server is still starting, until stop is closed.
func (b *Bridge) reportSlowStart(stop <-chan struct{}) {
	started := time.Now()
	t := time.NewTicker(b.stillStartingAfter)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			attrs := []any{"server", b.describe(), "elapsed", time.Since(started).Round(time.Second), "limit", b.opts.ConnectTimeout}
			if IsPackageLauncher(b.opts.Command) {
				attrs = append(attrs, "note", "a first start through "+baseName(b.opts.Command[0])+" downloads the package, which can take a minute or more")
			}
			b.log.Info("mcp bridge: the MCP server is still starting", attrs...)
		}
	}
}

// redactEnv replaces in s every value of env (KEY=VALUE entries, the
// secrets a config gives the server) of 8 bytes or more with
// "[redacted]": a server that prints its settings to its standard error
// must not put them into the bridge's errors and logs.
func redactEnv(s string, env []string) string {
	for _, kv := range env {
		if _, v, ok := strings.Cut(kv, "="); ok && len(v) >= 8 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
