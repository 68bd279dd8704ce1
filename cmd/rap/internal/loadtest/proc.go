package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// serverProcess is the gettime example running as a child process for
// "rap loadtest ack --server-proc", so that the load generator and the tool
// server have separate heaps, garbage collectors and schedulers.
type serverProcess struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed when the child has exited
}

// serverProcStop bounds how long the child may take to stop gracefully
// after an interrupt (the example's own grace is 10 s) before it is killed.
const serverProcStop = 15 * time.Second

// serverProcStart bounds how long the child may take to print its URL.
const serverProcStart = 20 * time.Second

// startServerProcess runs command (such as "rap example get-time --listen
// 127.0.0.1:0") and waits for the base URL it prints.
func startServerProcess(ctx context.Context, command []string, stderr io.Writer) (*serverProcess, error) {
	if len(command) == 0 {
		return nil, errors.New("--server-proc: no command to run the tool server")
	}
	self := command[0]
	cmd := exec.Command(self, command[1:]...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("--server-proc: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("--server-proc: starting %s example get-time: %w", self, err)
	}
	p := &serverProcess{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			// "get-time tool server listening on http://127.0.0.1:PORT"
			if _, u, ok := strings.Cut(sc.Text(), " listening on "); ok && !sent {
				urls <- strings.TrimSpace(u)
				sent = true
			}
		}
		close(urls)
	}()
	go func() {
		cmd.Wait() //nolint:errcheck // the exit is seen through ProcessState
		close(p.done)
	}()
	select {
	case u, ok := <-urls:
		if ok {
			p.url = u
			return p, nil
		}
		err = errors.New("the child exited without printing its URL")
	case <-time.After(serverProcStart):
		err = fmt.Errorf("the child printed no URL within %v", serverProcStart)
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.stop()
	return nil, fmt.Errorf("--server-proc: %w", err)
}

// stop interrupts the child, which shuts down gracefully, and returns the
// CPU time it used over its whole life, when the platform reports it.
func (p *serverProcess) stop() (time.Duration, bool) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(serverProcStop):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	st := p.cmd.ProcessState
	if st == nil {
		return 0, false
	}
	return st.UserTime() + st.SystemTime(), true
}
