package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
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

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/config"
)

// Supervision of toolset_command entries (issue 10 item 2, RAP CF-1).
//
// The contract is the reference runtime's: the program runs with
// RAP_EMBEDDED=1, listens on a port of its choice and prints {"port": N}
// on its standard output. "rap serve" runs it without a shell, waits for
// that line, and serves it to the runtime under a stable in-process name,
// http://NAME.cmd.rap.invalid, forwarded to http://127.0.0.1:N: the port
// changes when the program is restarted, the name the sessions cached its
// manifest under does not.
// commandStartTimeout bounds how long a program may take to print its
// port (a variable for tests).
var commandStartTimeout = 15 * time.Second

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

// commandServers are the supervised toolset_command programs of a "rap
// serve".
type commandServers struct {
	sups []*commandSupervisor
	urls []string
}

// startCommandServers starts the toolset_command entries of the config in
// parallel and registers each that reports its port in hosts. An entry
// that cannot start is reported on stdout and in the log, and skipped; the
// others load. toolToken, when set, is sent to the programs as the
// runtime's bearer token (RAP TR-8).
func startCommandServers(ctx context.Context, s *config.Settings, dir string, hosts inProcessHosts, toolToken string, log *slog.Logger, stdout io.Writer) *commandServers {
	cs := &commandServers{}
	f, _, err := s.LoadToolSets(dir, getenvOS)
	if err != nil || f == nil {
		return cs // ToolServers already reported the config error
	}
	entries := f.Commands()
	sups := make([]*commandSupervisor, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		sups[i] = newCommandSupervisor(e, dir, log)
		wg.Go(func() { errs[i] = sups[i].start(ctx) })
	}
	wg.Wait()
	for i, e := range entries {
		sup := sups[i]
		if errs[i] != nil {
			log.Error("toolset_command skipped", "name", sup.name, "entry", e.Source, "err", errs[i])
			fmt.Fprintf(stdout, "rap serve: toolset_command %q (%s) skipped: %v\n", sup.name, e.Source, errs[i])
			continue
		}
		base := hosts.add("cmd", sup.name, sup.proxy(toolToken))
		sup.host = strings.TrimPrefix(base, "http://")
		cs.sups = append(cs.sups, sup)
		cs.urls = append(cs.urls, base)
		fmt.Fprintf(stdout, "rap serve: toolset_command %q started (pid %d, port %d), served as %s\n", sup.name, sup.pid(), sup.port.Load(), base)
		go sup.supervise()
	}
	return cs
}

// shutdown stops every program: SIGTERM to its process group, then
// SIGKILL after commandStopGrace.
func (cs *commandServers) shutdown() {
	var wg sync.WaitGroup
	for _, sup := range cs.sups {
		wg.Go(sup.stop)
	}
	wg.Wait()
}

// commandSupervisor runs one toolset_command program and restarts it when
// it exits.
type commandSupervisor struct {
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
}

// commandProcess is one run of a program.
type commandProcess struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{} // closed once Wait returned
	err     error         // Wait's error, set before exited is closed
}

func newCommandSupervisor(e config.ToolSet, dir string, log *slog.Logger) *commandSupervisor {
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
	return &commandSupervisor{
		name: c.Name, source: e.Source, argv: c.Argv, env: env, dir: dir,
		log:      log.With("toolset_command", c.Name),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

func (s *commandSupervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.cmd.Process == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// start runs the program once and waits until it prints its port, exits,
// or commandStartTimeout passes.
func (s *commandSupervisor) start(ctx context.Context) error {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env = s.env
	cmd.Dir = s.dir
	setProcessGroup(cmd)
	ports := make(chan int, 1)
	var seen atomic.Bool
	cmd.Stdout = &cmdLineWriter{fn: func(line string) {
		if !seen.Load() {
			if p, ok := parsePortLine(line); ok {
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
	timer := time.NewTimer(commandStartTimeout)
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
		err := fmt.Errorf("%s printed no {\"port\": N} line within %s; a toolset_command program must print its port on its first line of output when %s=1 is set", strconv.Quote(s.argv[0]), commandStartTimeout, config.EnvEmbedded)
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

// supervise restarts the program, with backoff, each time it exits, until
// stop is called.
func (s *commandSupervisor) supervise() {
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
			err := s.start(context.Background())
			if err == nil {
				break
			}
			s.log.Error("toolset_command restart failed", "err", err, "retry_in", backoff)
		}
	}
}

// stop ends supervision and the program.
func (s *commandSupervisor) stop() {
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

// parsePortLine reads a {"port": N} line.
func parsePortLine(line string) (int, bool) {
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

// proxy forwards the runtime's requests to the program's current port,
// keeping the in-process host name, so that a RAP server that builds its
// manifest's endpoint from the request names the stable host. A manifest
// whose endpoint names the program's own loopback port is rewritten to the
// stable host too. While the program is down, requests fail with 503.
func (s *commandSupervisor) proxy(toolToken string) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(int(s.port.Load()))})
			r.Out.Host = r.In.Host
			if toolToken != "" {
				r.Out.Header.Set("Authorization", "Bearer "+toolToken)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
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
		rp.ServeHTTP(w, r)
	})
}

// rewriteEndpoint replaces a manifest endpoint on the program's loopback
// port with the stable host.
func (s *commandSupervisor) rewriteEndpoint(resp *http.Response) error {
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

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
