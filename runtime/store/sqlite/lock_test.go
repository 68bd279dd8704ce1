//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// lockHelperEnv names the database the lock helper process opens.
const lockHelperEnv = "GORAP_SQLITE_LOCK_HELPER_DB"

// TestLockHelper is not a test: it is the process the lock tests start. It
// opens the store named by lockHelperEnv, says "open" on stdout and holds
// the store until its stdin closes or it is killed. An Open error is
// printed on stderr with exit status 3.
func TestLockHelper(t *testing.T) {
	path := os.Getenv(lockHelperEnv)
	if path == "" {
		return
	}
	s, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("open")
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	os.Exit(0)
}

// lockHelper is a running TestLockHelper process.
type lockHelper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startLockHelper starts a process that opens the store at path and waits
// until it says it has, or until it exits; it returns the stderr and the
// exit error of a process that could not open the store.
func startLockHelper(t *testing.T, path string) (h *lockHelper, stderr string, exitErr error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+path)
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) == "open" {
		h = &lockHelper{cmd: cmd, stdin: stdin}
		t.Cleanup(func() { h.cmd.Process.Kill(); h.cmd.Wait() })
		return h, "", nil
	}
	stdin.Close()
	err = cmd.Wait()
	if err == nil {
		err = errors.New("exited with status 0 without opening the store")
	}
	return nil, errBuf.String(), err
}

// A second process refuses a store another process has
// open, naming the holder's PID; the lock is free again once the holder is
// killed with SIGKILL, and after an orderly close.
func TestStoreLockTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runtime.db")
	first, stderr, err := startLockHelper(t, path)
	if first == nil {
		t.Fatalf("the first process could not open the store: %v\n%s", err, stderr)
	}
	pid := first.cmd.Process.Pid

	second, stderr, err := startLockHelper(t, path)
	if second != nil {
		t.Fatal("a second process opened the store while the first one held it")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("second process: %v, want exit status 3\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "PID "+strconv.Itoa(pid)) || !strings.Contains(stderr, path+".lock") {
		t.Fatalf("second process said %q; want the holder's PID %d and the lock file", stderr, pid)
	}

	// This process is refused too, with a *LockedError.
	if _, err := Open(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while another process holds the store: %v, want ErrLocked", err)
	} else if le := (*LockedError)(nil); !errors.As(err, &le) || le.PID != pid {
		t.Fatalf("Open: %#v, want a *LockedError with PID %d", err, pid)
	}

	// SIGKILL: the holder cannot release anything itself.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()
	third, stderr, err := startLockHelper(t, path)
	if third == nil {
		t.Fatalf("the store stayed locked after its holder was killed: %v\n%s", err, stderr)
	}
	third.stdin.Close() // an orderly Close
	if err := third.cmd.Wait(); err != nil {
		t.Fatalf("third process: %v", err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open after the holder closed the store: %v", err)
	}
	s.Close()
}

// Two Stores of one process on one database conflict as
// well; Close releases the lock.
func TestStoreLockSameProcess(t *testing.T) {
	s, path := open(t)
	_, err := Open(path)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("this process (PID %d)", os.Getpid())) {
		t.Fatalf("second Open: %v, want ErrLocked naming this process", err)
	}
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}

// The database, its -wal and -shm files and the lock file
// are 0600 even under a umask that lets everyone read, and files an older
// gorap left readable by all are made private when the store opens.
func TestStoreFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "runtime.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	wantModes(t, path, path+"-wal", path+"-shm", path+".lock")
	s.Close()

	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".lock"} {
		if err := os.Chmod(p, 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantModes(t, path, path+"-wal", path+"-shm", path+".lock")
}

// wantModes fails unless every file exists with mode 0600.
func wantModes(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", filepath.Base(p), m)
		}
	}
}
