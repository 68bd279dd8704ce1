// Package toolsetcmd runs the toolset_command entries of a runtime's config
// (RAP CF-1): each program is started without a shell,
// supervised and restarted with backoff, and served to the runtime under a
// stable in-process name.
//
// The contract is the reference runtime's: the program runs with
// RAP_EMBEDDED=1, listens on a port of its choice and prints {"port": N}
// on its standard output. The supervisor waits for that line and forwards
// the stable name, such as http://NAME.cmd.rap.invalid, to
// http://127.0.0.1:N: the port changes when the program is restarted, the
// name the sessions cached its manifest under does not.
package toolsetcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/config"
)

// StartTimeout bounds how long a program may take to print its port
// (a variable for tests).
var StartTimeout = 15 * time.Second

const (
	// commandStopGrace is how long a program has to exit after SIGTERM
	// before its process group is killed.
	commandStopGrace = 5 * time.Second
	// commandBackoffMin and commandBackoffMax bound the delay before a
	// restart; the delay doubles after each exit that follows a short run.
	commandBackoffMin = 250 * time.Millisecond
	commandBackoffMax = 30 * time.Second
	// commandStableRun is how long a program must have run for its next
	// restart to start from commandBackoffMin again.
	commandStableRun = 30 * time.Second
	// maxCommandLine bounds one line of a program's output.
	maxCommandLine = 64 << 10
)

// Supervisor runs one toolset_command program and restarts it when
// it exits.
type Supervisor struct {
	name   string
	source string
	argv   []string
	env    []string
	dir    string
	log    *slog.Logger
	host   string // the in-process host, such as "srv.cmd.rap.invalid"

	port     atomic.Int32 // the current port; 0 while the program is down
	stopping chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when supervise returns

	mu   sync.Mutex
	proc *commandProcess // the running program

	calls callTracker // invocations the running program acknowledged
}

// commandProcess is one run of a program.
type commandProcess struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{} // closed once Wait returned
	err     error         // Wait's error, set before exited is closed
}

// New returns a supervisor of the toolset_command entry e, run in dir
// with RAP_EMBEDDED=1 and the entry's environment added to this one.
func New(e config.ToolSet, dir string, log *slog.Logger) *Supervisor {
	c := e.Command
	env := append(os.Environ(), config.EnvEmbedded+"=1")
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+c.Env[k])
	}
	return &Supervisor{
		name: c.Name, source: e.Source, argv: c.Argv, env: env, dir: dir,
		log:      log.With("toolset_command", c.Name),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// PID is the running program's process id; 0 while it is down.
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.cmd.Process == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Start runs the program once and waits until it prints its port, exits,
// or StartTimeout passes.
func (s *Supervisor) Start(ctx context.Context) error {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env = s.env
	cmd.Dir = s.dir
	setProcessGroup(cmd)
	ports := make(chan int, 1)
	var seen atomic.Bool
	cmd.Stdout = &cmdLineWriter{fn: func(line string) {
		if !seen.Load() {
			if p, ok := ParsePortLine(line); ok {
				seen.Store(true)
				ports <- p
				return
			}
		}
		s.log.Info("toolset_command output", "line", line)
	}}
	cmd.Stderr = &cmdLineWriter{fn: func(line string) { s.log.Info("toolset_command stderr", "line", line) }}
	cmd.WaitDelay = time.Second // a grandchild holding the pipes does not block Wait
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot run %s: %w; check the command of the entry (the program must exist and be executable)", strconv.Quote(s.argv[0]), err)
	}
	p := &commandProcess{cmd: cmd, started: time.Now(), exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case port := <-ports:
		s.mu.Lock()
		s.proc = p
		s.mu.Unlock()
		s.port.Store(int32(port))
		s.log.Info("toolset_command started", "pid", cmd.Process.Pid, "port", port)
		return nil
	case <-p.exited:
		return fmt.Errorf("%s exited (%v) before printing its port; a toolset_command program must print {\"port\": N} on its first line of output when %s=1 is set", strconv.Quote(s.argv[0]), exitText(p.err), config.EnvEmbedded)
	case <-timer.C:
		err := fmt.Errorf("%s printed no {\"port\": N} line within %s; a toolset_command program must print its port on its first line of output when %s=1 is set", strconv.Quote(s.argv[0]), StartTimeout, config.EnvEmbedded)
		killProcess(p)
		return err
	case <-ctx.Done():
		killProcess(p)
		return context.Cause(ctx)
	case <-s.stopping:
		killProcess(p)
		return errors.New("rap serve is stopping")
	}
}

// Supervise restarts the program, with backoff, each time it exits, until
// Stop is called.
func (s *Supervisor) Supervise() {
	defer close(s.done)
	backoff := commandBackoffMin
	for {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		select {
		case <-s.stopping:
			return
		case <-p.exited:
		}
		s.port.Store(0)
		signalGroup(p.cmd, true) // what the program started goes with it
		go s.failCalls(s.calls.take(), exitText(p.err))
		if time.Since(p.started) >= commandStableRun {
			backoff = commandBackoffMin
		}
		s.log.Warn("toolset_command exited; restarting it", "pid", p.cmd.Process.Pid, "status", exitText(p.err), "restart_in", backoff)
		for {
			t := time.NewTimer(backoff)
			select {
			case <-s.stopping:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, commandBackoffMax)
			err := s.Start(context.Background())
			if err == nil {
				break
			}
			s.log.Error("toolset_command restart failed", "err", err, "retry_in", backoff)
		}
	}
}

// Stop ends supervision and the program.
func (s *Supervisor) Stop() {
	s.stopOnce.Do(func() { close(s.stopping) })
	<-s.done
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case <-p.exited: // ended and cleaned up by supervise
		return
	default:
	}
	terminateProcess(p)
	s.port.Store(0)
	s.log.Info("toolset_command stopped", "pid", p.cmd.Process.Pid)
}

// terminateProcess sends SIGTERM to the process group, waits up to
// commandStopGrace, then kills the group.
func terminateProcess(p *commandProcess) {
	signalGroup(p.cmd, false)
	t := time.NewTimer(commandStopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	}
	killProcess(p)
}

// killProcess kills the process group and waits for the program.
func killProcess(p *commandProcess) {
	signalGroup(p.cmd, true)
	<-p.exited
}

// exitText describes how a program ended.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// ParsePortLine reads a {"port": N} line.
func ParsePortLine(line string) (int, bool) {
	var ready struct {
		Port *int `json:"port"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &ready); err != nil || ready.Port == nil {
		return 0, false
	}
	if *ready.Port < 1 || *ready.Port > 65535 {
		return 0, false
	}
	return *ready.Port, true
}

// Proxy forwards the runtime's requests to the program's current port,
// keeping the in-process host name, so that a RAP server that builds its
// manifest's endpoint from the request names the stable host. A manifest
// whose endpoint names the program's own loopback port is rewritten to the
// stable host too. While the program is down, requests fail with 503.
func (s *Supervisor) Proxy(toolToken string) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(int(s.port.Load()))})
			r.Out.Host = r.In.Host
			if toolToken != "" {
				bearer.Set(r.Out.Header, toolToken)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			s.trackAcknowledged(resp)
			if resp.Request.URL.Path != rap.WellKnownPath || resp.StatusCode != http.StatusOK {
				return nil
			}
			return s.rewriteEndpoint(resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("toolset_command unreachable", "path", r.URL.Path, "err", err)
			http.Error(w, fmt.Sprintf("toolset_command %q is not reachable (%v); rap serve restarts it", s.name, err), http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.port.Load() == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("toolset_command %q is restarting; try again shortly", s.name), http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, noteInvocation(r))
	})
}

// rewriteEndpoint replaces a manifest endpoint on the program's loopback
// port with the stable host.
func (s *Supervisor) rewriteEndpoint(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, rap.MaxManifestBytes+1))
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var m map[string]json.RawMessage
	var ep string
	if json.Unmarshal(body, &m) != nil || json.Unmarshal(m["endpoint"], &ep) != nil {
		return nil
	}
	u, err := url.Parse(ep)
	if err != nil || u.Port() != strconv.Itoa(int(s.port.Load())) {
		return nil
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "0.0.0.0" && h != "::1" {
		return nil
	}
	u.Scheme, u.Host = "http", s.host
	m["endpoint"], _ = json.Marshal(u.String())
	body, err = json.Marshal(m)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// cmdLineWriter calls fn with each complete line written to it (without the
// newline); longer lines are cut at maxCommandLine.
type cmdLineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(string)
}

func (w *cmdLineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxCommandLine {
				w.fn(string(w.buf[:maxCommandLine]))
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.fn(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
}

// Name is the entry's name.
func (s *Supervisor) Name() string { return s.name }

// Port is the program's current port; 0 while it is down.
func (s *Supervisor) Port() int { return int(s.port.Load()) }

// SetHost sets the in-process host the runtime reaches the program at,
// such as "srv.cmd.rap.invalid", before the first request.
func (s *Supervisor) SetHost(host string) { s.host = host }
