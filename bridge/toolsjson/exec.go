package toolsjson

import (
	"bytes"
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

// runExec runs an exec tool (issue 12 item 6): the input JSON goes to a
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
	cmd := exec.CommandContext(ctx, t.Transport.Command, append([]string{in}, t.Transport.Args...)...)
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
	var stdout limitedBuffer
	stdout.max = MaxOutputBytes
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second

	err = cmd.Run()
	switch {
	case parent.Err() != nil:
		return nil, context.Cause(parent)
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
	case stdout.over:
		return nil, fmt.Errorf("printed more than %d bytes; a result must be one JSON document", MaxOutputBytes)
	}
	return stdout.Bytes(), nil
}

// limitedBuffer keeps at most max bytes and notes whether more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last stderrTail bytes written.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > stderrTail {
		t.b = append([]byte(nil), t.b[len(t.b)-stderrTail:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
