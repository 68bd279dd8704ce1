package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress notifications are read off the wire by a tap on the server's
// output, before the MCP SDK parses it, so that every notification the
// server sent before its response has reached the progress table when
// CallTool returns. (The SDK hands notifications to handlers on another
// goroutine, which can run after the response was delivered.) The SDK's
// own ProgressNotificationHandler stays as a fallback; duplicates are
// dropped by the progress table.

// maxTapLine bounds the bytes the tap buffers for one line; longer lines
// (large results) are skipped: a progress notification is small.
const maxTapLine = 64 << 10

var progressMethod = []byte(`"notifications/progress"`)

// progressTap passes r through and hands each progress notification in it
// to deliver. With sse, only "data:" lines of an event stream are read.
type progressTap struct {
	r       io.Reader
	sse     bool
	deliver func(*sdk.ProgressNotificationParams)
	buf     []byte
	skip    bool // inside a line longer than maxTapLine
}

func (t *progressTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.scan(p[:n])
	}
	return n, err
}

func (t *progressTap) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !t.skip {
				t.buf = append(t.buf, b...)
				if len(t.buf) > maxTapLine {
					t.buf, t.skip = t.buf[:0], true
				}
			}
			return
		}
		if !t.skip {
			t.buf = append(t.buf, b[:i]...)
			t.inspect(t.buf)
		}
		t.buf, t.skip = t.buf[:0], false
		b = b[i+1:]
	}
}

func (t *progressTap) inspect(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if t.sse {
		var ok bool
		if line, ok = bytes.CutPrefix(line, []byte("data:")); !ok {
			return
		}
	}
	if !bytes.Contains(line, progressMethod) {
		return
	}
	var msg struct {
		Method string                          `json:"method"`
		ID     json.RawMessage                 `json:"id"`
		Params *sdk.ProgressNotificationParams `json:"params"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &msg) != nil || msg.Method != "notifications/progress" || msg.ID != nil || msg.Params == nil {
		return
	}
	t.deliver(msg.Params)
}

// stdioTransport starts a command and speaks MCP on its standard input and
// output, like the SDK's CommandTransport, with a progress tap on its
// output.
type stdioTransport struct {
	cmd           *exec.Cmd
	stderr        io.Writer // where the server's standard error goes
	tail          stderrTail
	deliver       func(*sdk.ProgressNotificationParams)
	terminateWait time.Duration
	status        func(taskInfo) // notifications/tasks/status
	conn          *taskConn      // set by Connect
	stdin         *processStdin  // set by Connect once the server runs
}

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	errw, err := t.tail.pipe(t.stderr)
	if err != nil {
		return nil, err
	}
	t.cmd.Stderr = errw
	err = t.cmd.Start()
	errw.Close() // the server holds its own copy
	if err != nil {
		return nil, err
	}
	t.stdin = &processStdin{cmd: t.cmd, stdin: stdin, wait: t.terminateWait}
	io := &sdk.IOTransport{
		Reader: readNopCloser{&progressTap{r: stdout, deliver: t.deliver}},
		Writer: t.stdin,
	}
	c, err := io.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = newTaskConn(c, t.status) // MCP tasks, see taskconn.go
	return t.conn, nil
}

// close stops the server if it was started (a start that failed);
// stopping it twice is harmless.
func (t *stdioTransport) close() {
	if t.stdin != nil {
		_ = t.stdin.Close()
	}
}

// readNopCloser: the connection is closed by closing the server's stdin.
type readNopCloser struct{ io.Reader }

func (readNopCloser) Close() error { return nil }

// processStdin is the server's standard input; closing it stops the
// server as the MCP stdio transport asks: close stdin, wait, SIGTERM,
// wait, SIGKILL.
type processStdin struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	wait  time.Duration // before SIGTERM, then before SIGKILL
	once  sync.Once
	err   error
}

func (p *processStdin) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *processStdin) Close() error {
	p.once.Do(func() {
		_ = p.stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- p.cmd.Wait() }()
		wait := func() bool {
			t := time.NewTimer(p.wait)
			defer t.Stop()
			select {
			case p.err = <-exited:
				return true
			case <-t.C:
				return false
			}
		}
		if wait() {
			return
		}
		if p.cmd.Process.Signal(syscall.SIGTERM) == nil && wait() {
			return
		}
		_ = p.cmd.Process.Kill()
		if !wait() {
			p.err = errors.New("the MCP server process did not exit after SIGKILL")
		}
	})
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return nil // a server stopped by a signal is not a close error
	}
	return p.err
}

// tapTransport adds a progress tap to event-stream responses of a
// Streamable HTTP server.
type tapTransport struct {
	next    http.RoundTripper
	deliver func(*sdk.ProgressNotificationParams)
}

func (t tapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = tapBody{Reader: &progressTap{r: resp.Body, sse: true, deliver: t.deliver}, Closer: resp.Body}
	return resp, nil
}

type tapBody struct {
	io.Reader
	io.Closer
}
