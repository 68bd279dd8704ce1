package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// walSyncer makes committed write transactions durable off the writer
// connection, so that the writer runs the next group of Update calls while
// the previous group's fsync is in flight (pipelined group commit).
//
// The writer connection commits with synchronous=NORMAL: COMMIT appends the
// transaction to the WAL file without syncing it. The committer then hands
// the group to the syncer, whose goroutine syncs the WAL file and only then
// lets the group's Update calls return. One sync covers every transaction
// committed before it began, because the WAL is one append-only file:
// after a power loss SQLite recovers a prefix of the committed
// transactions, and every transaction that was reported committed is in it.
//
// Readers may see a transaction a few milliseconds before it is durable.
// Nothing the engine does with what it reads leaves the process before its
// own Update returns, which waits for a later sync, so no effect outside
// the process can depend on a transaction a power loss could undo.
//
// A failed sync is not retried: the kernel may have dropped the dirty pages
// (as PostgreSQL learned), so the store reports every later write as
// failed and must be reopened.
type walSyncer struct {
	dbPath string
	sync   func() error // syncs the WAL (another function in tests)

	flushMu   sync.Mutex // serializes flush
	mu        sync.Mutex
	pending   []func(error)
	syncing   bool          // a sync is in flight
	closed    bool          // close was called: after syncs in the caller
	syncEnded chan struct{} // closed when it ends
	failed    error
	wake      chan struct{}
	quit      chan struct{}
	done      chan struct{}
	wal       *os.File // the WAL as last opened
	closeOnce sync.Once
	stats     *writerStats

	// checkpoint copies the WAL into the database file, off the writer
	// (which runs with wal_autocheckpoint off); nil means never. Set with
	// setCheckpoint; guarded by mu.
	checkpoint      func()
	checkpointing   atomic.Bool
	checkpoints     sync.WaitGroup
	sinceCheckpoint int // groups synced since the last checkpoint; loop only
}

// newWALSyncer starts a syncer; sync nil means syncing the WAL file.
func newWALSyncer(dbPath string, stats *writerStats, sync func() error) *walSyncer {
	s := &walSyncer{dbPath: dbPath, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), stats: stats, sync: sync}
	if s.sync == nil {
		s.sync = s.syncWAL
	}
	go s.loop()
	return s
}

// after runs deliver with the outcome of the first sync that begins after
// this call; with the error of an earlier failed sync at once.
func (s *walSyncer) after(deliver func(error)) {
	s.mu.Lock()
	if s.failed != nil {
		err := s.failed
		s.mu.Unlock()
		deliver(err)
		return
	}
	if s.closed {
		// The loop is gone (a write raced with Close): sync here.
		s.pending = append(s.pending, deliver)
		s.mu.Unlock()
		s.flush()
		return
	}
	s.pending = append(s.pending, deliver)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// waitWhileSyncing blocks until a sync in flight ends or arrived is
// signalled. It reports false at once when no sync is in flight.
func (s *walSyncer) waitWhileSyncing(arrived <-chan struct{}) bool {
	s.mu.Lock()
	if !s.syncing {
		s.mu.Unlock()
		return false
	}
	ended := s.syncEnded
	s.mu.Unlock()
	select {
	case <-ended:
	case <-arrived:
	}
	return true
}

// setCheckpoint installs the checkpoint function.
func (s *walSyncer) setCheckpoint(fn func()) {
	s.mu.Lock()
	s.checkpoint = fn
	s.mu.Unlock()
}

// broken returns the error of a failed sync, if any.
func (s *walSyncer) broken() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *walSyncer) loop() {
	defer close(s.done)
	for {
		select {
		case <-s.wake:
		case <-s.quit:
			s.flush() // deliver what was committed before Close
			return
		}
		s.flush()
	}
}

// flush syncs once for every delivery queued so far. Flushes never
// overlap (the loop's and, after close, a caller's).
func (s *walSyncer) flush() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	if len(batch) > 0 {
		s.syncing = true
		s.syncEnded = make(chan struct{})
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	start := time.Now()
	err := s.sync()
	s.stats.recordSync(time.Since(start))
	s.mu.Lock()
	s.syncing = false
	close(s.syncEnded)
	s.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("sqlite store %s: sync the write-ahead log: %w; the last writes may not be on disk and the store refuses further writes: restart the program", s.dbPath, err)
		s.mu.Lock()
		if s.failed == nil {
			s.failed = err
		}
		err = s.failed
		s.mu.Unlock()
	}
	for _, deliver := range batch {
		deliver(err)
	}
	s.mu.Lock()
	checkpoint := s.checkpoint
	s.mu.Unlock()
	if err == nil && checkpoint != nil {
		s.sinceCheckpoint++
		if s.sinceCheckpoint >= checkpointEvery && s.checkpointing.CompareAndSwap(false, true) {
			s.sinceCheckpoint = 0
			s.checkpoints.Add(1)
			go func() {
				defer s.checkpoints.Done()
				defer s.checkpointing.Store(false)
				checkpoint()
				s.stats.recordCheckpoint()
			}()
		}
	}
}

// checkpointEvery is how many syncs pass between checkpoints: a few
// hundred WAL pages, about what SQLite's automatic checkpoint (1,000 pages)
// lets through, but copied by another connection while the writer goes on.
const checkpointEvery = 64

// close delivers what is pending and stops the goroutine; later calls do
// nothing.
func (s *walSyncer) close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.quit)
		<-s.done
		s.checkpoints.Wait()
		if s.wal != nil {
			s.wal.Close()
		}
	})
}

// syncWAL syncs the WAL file's data to disk. The file is opened on first
// use (and again if SQLite replaced it), and its directory is synced then
// so that the file itself survives a power loss.
func (s *walSyncer) syncWAL() error {
	path := s.dbPath + "-wal"
	if s.wal != nil {
		cur, err1 := os.Stat(path)
		open, err2 := s.wal.Stat()
		if err1 != nil || err2 != nil || !os.SameFile(cur, open) {
			s.wal.Close()
			s.wal = nil
		}
	}
	if s.wal == nil {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			// No WAL file: the commits went to the database file itself.
			return syncPath(s.dbPath)
		}
		if err != nil {
			return err
		}
		if err := syncPath(filepath.Dir(path)); err != nil {
			f.Close()
			return err
		}
		s.wal = f
	}
	return dataSync(s.wal)
}

// syncPath opens a file or directory and syncs it.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
