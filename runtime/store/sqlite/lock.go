package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gorap/gorap/internal/privfile"
)

// One process per store. A store is its database file and the lock file
// beside it (runtime.db.lock for runtime.db), which Open locks exclusively
// for as long as the store is open and in which it writes its process id.
// A second Open of the same database, by another process or by this one,
// fails with a *LockedError naming the holder, instead of running a second
// runtime that would take over the first one's threads, calls and timers.
// The operating system releases the lock when the holder's process ends,
// however it ends (SIGKILL included), so a crash never leaves a stale lock
// behind; the file itself stays, and its PID is only informative.
//
// Several runtime processes on one database are for later (a shared
// server database): they would replace this lock by per-thread claims,
// taken in a store.Store.Update where the runtime now gives a thread a
// live worker in its in-process map (runtime.Runtime.threads), with an
// owner and a lease renewed while the worker runs.

// LockedError is the error of Open when another process, or another Store
// of this process, has the database open.
type LockedError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process id, or 0 when the lock file does not
	// say (it was being written).
	PID int
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID == os.Getpid() {
		holder = fmt.Sprintf("this process (PID %d)", e.PID)
	} else if e.PID > 0 {
		holder = fmt.Sprintf("another process (PID %d)", e.PID)
	}
	return fmt.Sprintf("the store is in use by %s: lock file %s is held; stop that process or use another data directory", holder, e.Path)
}

// ErrLocked is matched by errors.Is against a *LockedError.
var ErrLocked = errors.New("store is locked by another process")

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// lockPath is the lock file of the database at dbPath.
func lockPath(dbPath string) string { return dbPath + ".lock" }

// acquireLock takes the exclusive lock of the database at dbPath and
// writes this process's id into the lock file. Close the returned file to
// release the lock.
func acquireLock(dbPath string) (*os.File, error) {
	path := lockPath(dbPath)
	f, err := privfile.OpenFile(path, os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: open lock file %s: %w", path, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sqlite store: lock %s: %w", path, err)
	}
	if !held {
		pid := readPID(f)
		f.Close()
		return nil, &LockedError{Path: path, PID: pid}
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("sqlite store: write lock file %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("sqlite store: write lock file %s: %w", path, err)
	}
	return f, nil
}

// readPID reads the holder's process id from the lock file, 0 when it
// holds none.
func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
