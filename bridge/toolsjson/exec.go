package toolsjson

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MaxOutputBytes bounds what a tool may return: an exec tool's standard
// output or an http tool's response body.
const MaxOutputBytes = 4 << 20

// stderrTail is how much of an exec tool's standard error an Error result
// quotes.
const stderrTail = 2 << 10

// execEnv is what an exec tool's environment holds besides its secrets:
// nothing else of the server's environment (tokens, API keys) reaches it.
var execEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// runExec runs an exec tool: the input JSON goes to a
// private temporary file whose path is the first argument, then the
// transport's args; no shell is involved. ctx ending (cancel_tool_call,
// close_thread, the timeout) kills the whole process group.
func runExec(ctx context.Context, t *Tool, input []byte, secrets map[string]string, timeout time.Duration) ([]byte, error) {
	dir, err := os.MkdirTemp("", "rap-toolsjson-")
	if err != nil {
		return nil, fmt.Errorf("cannot create the input file: %v", err)
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "input.json")
	if err := os.WriteFile(in, input, 0o600); err != nil {
		return nil, fmt.Errorf("cannot write the input file: %v", err)
	}

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// run ends when ctx does, or as soon as the output passes the cap.
	run, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(run, t.Transport.Command, append([]string{in}, t.Transport.Args...)...)
	env := make([]string, 0, len(execEnv)+len(secrets))
	for _, k := range execEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, id := range sortedKeys(secrets) {
		env = append(env, EnvName(id)+"="+secrets[id])
	}
	cmd.Env = env
	cmd.Dir = dir
	stdout := &cappedWriter{max: MaxOutputBytes, onOver: stop}
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second

	err = cmd.Run()
	switch {
	case parent.Err() != nil:
		return nil, context.Cause(parent)
	case stdout.over:
		return nil, fmt.Errorf("printed more than %d bytes, the most a result may be, and was stopped; make it print one smaller JSON document", MaxOutputBytes)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("timed out after %v and was stopped (its process group was killed); try a smaller request", timeout)
	case err != nil:
		var ee *exec.ExitError
		tail := strings.TrimSpace(stderr.String())
		if tail == "" {
			tail = "(no output on stderr)"
		}
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("exited with status %d; stderr ends with: %s", ee.ExitCode(), tail)
		}
		return nil, fmt.Errorf("could not run %s: %v", t.Transport.Command, err)
	}
	return stdout.buf, nil
}

// cappedWriter keeps at most max bytes. The first byte past max sets over
// and calls onOver, which stops the tool (its whole process group); bytes
// that still arrive until it is gone are read and dropped, so the tool
// never blocks on a full pipe. A tool that prints too much has failed
// whatever it prints next, so letting it run on would only spend CPU until
// its timeout.
//
// It is a plain struct with only Write: no embedded buffer, so no
// promoted ReadFrom that io.Copy (and os/exec's pipe copier) would call
// instead of Write, bypassing the cap.
type cappedWriter struct {
	buf    []byte
	max    int
	over   bool
	onOver func()
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.over {
		return len(p), nil
	}
	room := w.max - len(w.buf)
	if len(p) <= room {
		w.grow(len(p))
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	w.grow(room)
	w.buf = append(w.buf, p[:room]...)
	w.over = true
	if w.onOver != nil {
		w.onOver()
	}
	return len(p), nil
}

// grow makes room for n more bytes, doubling the buffer but never past
// max: a full buffer costs at most about 2*max bytes of allocation,
// where append's gentler growth for large slices costs several times max.
func (w *cappedWriter) grow(n int) {
	if len(w.buf)+n <= cap(w.buf) {
		return
	}
	c := max(2*cap(w.buf), len(w.buf)+n, 4<<10)
	c = min(c, w.max)
	nb := make([]byte, len(w.buf), c)
	copy(nb, w.buf)
	w.buf = nb
}

// tailBuffer keeps the last stderrTail bytes written.
type tailBuffer struct{ b []byte }

// Write keeps the last stderrTail bytes of what was written so far; its
// buffer never holds more than twice that, however much arrives.
func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if n >= stderrTail {
		t.b = append(t.b[:0], p[n-stderrTail:]...)
		return n, nil
	}
	t.b = append(t.b, p...)
	if len(t.b) > stderrTail {
		k := copy(t.b, t.b[len(t.b)-stderrTail:])
		t.b = t.b[:k]
	}
	return n, nil
}

func (t *tailBuffer) String() string { return string(t.b) }
