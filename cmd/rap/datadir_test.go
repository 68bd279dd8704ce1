//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/config"
)

// Environment of the helper process that runs the rap command.
const (
	rapHelperArgsEnv  = "GORAP_RAP_HELPER_ARGS" // the arguments, one a line
	rapHelperUmaskEnv = "GORAP_RAP_HELPER_UMASK_ZERO"
)

// TestRapHelper is not a test: it is the rap command, run as a process of
// its own by the tests below. It does nothing unless started by them.
func TestRapHelper(t *testing.T) {
	args := os.Getenv(rapHelperArgsEnv)
	if args == "" {
		return
	}
	if os.Getenv(rapHelperUmaskEnv) != "" {
		syscall.Umask(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, strings.Split(args, "\n"), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// rapProcess is a running "rap serve" process.
type rapProcess struct {
	cmd    *exec.Cmd
	stdout string // what it printed up to "listening on"
}

// startServeProcess starts "rap serve args..." in dir with a zero umask and waits
// until it listens. When it exits first, it returns nil, its stderr and
// its exit error.
func startServeProcess(t *testing.T, dir string, args ...string) (p *rapProcess, stderr string, exitErr error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRapHelper$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), rapHelperArgsEnv+"="+strings.Join(append([]string{"serve"}, args...), "\n"), rapHelperUmaskEnv+"=1")
	var errBuf syncBuffer
	cmd.Stderr = &errBuf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen strings.Builder
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				if err == nil {
					err = errors.New("exited with status 0 before listening")
				}
				return nil, errBuf.String(), err
			}
			seen.WriteString(line + "\n")
			if !strings.HasPrefix(line, "Talk to it with") {
				continue
			}
			go func() {
				for range lines {
				}
			}()
			p = &rapProcess{cmd: cmd, stdout: seen.String()}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			return p, "", nil
		case <-timeout:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("rap serve did not start within 30s; stdout:\n%s\nstderr:\n%s", seen.String(), errBuf.String())
		}
	}
}

// stop ends the process with SIGTERM and waits for a clean exit.
func (p *rapProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("rap serve after SIGTERM: %v", err)
	}
}

// A second "rap serve" on the data directory of a running
// one refuses to start, naming the first one's PID and the --data-dir
// flag; once the first is killed with SIGKILL the directory is free again.
func TestServeStoreLockTwoProcesses(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--model", "scripted:" + writeScript(t, dir, tokyoScript), "--config", writeConfig(t, dir)}

	first, stderr, err := startServeProcess(t, dir, args...)
	if first == nil {
		t.Fatalf("first rap serve: %v\n%s", err, stderr)
	}
	second, stderr, err := startServeProcess(t, dir, args...)
	if second != nil {
		t.Fatalf("a second rap serve started on the data dir of a running one:\n%s", second.stdout)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second rap serve: %v, want exit status 1\n%s", err, stderr)
	}
	pid := strconv.Itoa(first.cmd.Process.Pid)
	for _, want := range []string{"PID " + pid, "--data-dir DIR", config.EnvDataDir} {
		if !strings.Contains(stderr, want) {
			t.Errorf("second rap serve said %q; want it to name %q", stderr, want)
		}
	}

	if err := first.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	first.cmd.Wait()
	third, stderr, err := startServeProcess(t, dir, args...)
	if third == nil {
		t.Fatalf("rap serve could not start after the holder was killed: %v\n%s", err, stderr)
	}
	third.stop(t)
}

// "rap serve" in a project (a directory with
// .rap/rap.json) keeps its store in the project's .rap/data, so two
// projects run side by side with a store each instead of sharing the
// user's; the directory is 0700 with a .gitignore, the store and the key
// 0600, under a umask that would let everyone read.
func TestServeProjectDataDir(t *testing.T) {
	clearRAPEnv(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	script := writeScript(t, t.TempDir(), tokyoScript)
	var procs []*rapProcess
	var projects []string
	for _, name := range []string{"alpha", "beta"} {
		p := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(filepath.Join(p, ".rap"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeConfig(t, filepath.Join(p, ".rap"))
		proc, stderr, err := startServeProcess(t, p, "--listen", "127.0.0.1:0", "--model", "scripted:"+script)
		if proc == nil {
			t.Fatalf("rap serve in project %s: %v\n%s", name, err, stderr)
		}
		procs = append(procs, proc)
		projects = append(projects, p)
	}
	for i, p := range projects {
		data := filepath.Join(p, ".rap", "data")
		if !strings.Contains(procs[i].stdout, "data dir:     "+data+"\n") {
			t.Errorf("rap serve in %s printed:\n%s\nwant data dir %s", p, procs[i].stdout, data)
		}
		for name, want := range map[string]os.FileMode{"": 0o700, "runtime.db": 0o600, "callback.key": 0o600, "runtime.db.lock": 0o600} {
			fi, err := os.Stat(filepath.Join(data, name))
			if err != nil {
				t.Errorf("project %s: %v", filepath.Base(p), err)
			} else if fi.Mode().Perm() != want {
				t.Errorf("project %s: %s has mode %#o, want %#o", filepath.Base(p), filepath.Join(data, name), fi.Mode().Perm(), want)
			}
		}
		if b, err := os.ReadFile(filepath.Join(data, ".gitignore")); err != nil || !strings.Contains(string(b), "*") {
			t.Errorf("project %s: .gitignore %q, %v", filepath.Base(p), b, err)
		}
	}
	if _, err := os.Stat(config.DefaultDataDir(os.Getenv)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the user-level data dir was used (%v)", err)
	}
	for _, p := range procs {
		p.stop(t)
	}
}

// --data-dir and RAP_DATA_DIR win over the project's
// data directory; outside a project the default stays the user's.
func TestProjectDataDirPrecedence(t *testing.T) {
	clearRAPEnv(t)
	project := t.TempDir()
	if err := os.MkdirAll(filepath.Join(project, ".rap"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, filepath.Join(project, ".rap"))
	resolve := func(wd string, args ...string) string {
		t.Helper()
		t.Chdir(wd)
		s, err := serveSettingsFor(args...)
		if err != nil {
			t.Fatal(err)
		}
		return s.DataDir
	}
	if got, want := resolve(project), filepath.Join(project, ".rap", "data"); got != want {
		t.Errorf("in a project: %s, want %s", got, want)
	}
	if got := resolve(project, "--data-dir", "/x/flag"); got != "/x/flag" {
		t.Errorf("with --data-dir: %s", got)
	}
	t.Setenv(config.EnvDataDir, "/x/env")
	if got := resolve(project); got != "/x/env" {
		t.Errorf("with %s: %s", config.EnvDataDir, got)
	}
	t.Setenv(config.EnvDataDir, "")
	if got, want := resolve(t.TempDir()), config.DefaultDataDir(getenvOS); got != want {
		t.Errorf("outside a project: %s, want %s", got, want)
	}
}
