package notes

// The notes on disk: one file per session, named by a hash of its id, and
// the per-session locks that keep a read-modify-write whole.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/gorap/gorap/rap"
)

// Limits of what a session holds. Imports are checked against them too, so
// a peer cannot store more than a tool call could.
const (
	// MaxNoteBytes bounds one note.
	MaxNoteBytes = 4096
	// MaxNotes bounds the notes of one session.
	MaxNotes = 1000
	// MaxSessionBytes bounds the file of one session (its JSON).
	MaxSessionBytes = 1 << 20
	// MaxSessionIDBytes bounds a session id, as the SDK bounds thread ids.
	MaxSessionIDBytes = rap.MaxIDBytes
)

// fileVersion is the "v" of a session file.
const fileVersion = 1

// sessionFile is the content of one session's file, and the body of an
// import (without V).
type sessionFile struct {
	V         int      `json:"v"`
	SessionID string   `json:"session_id"`
	Notes     []string `json:"notes"`
}

// checkSessionID says what is wrong with a session id, or returns nil. The
// id never becomes a path (fileName hashes it), so "../x" is a harmless
// opaque id; these checks only keep ids readable and bounded.
func checkSessionID(id string) error {
	switch {
	case id == "":
		return errors.New("session id is empty")
	case len(id) > MaxSessionIDBytes:
		return fmt.Errorf("session id is %d bytes, over the %d-byte limit", len(id), MaxSessionIDBytes)
	case !utf8.ValidString(id):
		return errors.New("session id is not valid UTF-8")
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return errors.New("session id contains a control character")
	}
	return nil
}

// checkNotes says what is wrong with a session's notes, or returns nil.
func checkNotes(notes []string) error {
	if len(notes) > MaxNotes {
		return fmt.Errorf("%d notes, over the limit of %d per session", len(notes), MaxNotes)
	}
	for i, n := range notes {
		if err := checkNote(n); err != nil {
			return fmt.Errorf("notes[%d]: %w", i, err)
		}
	}
	return nil
}

// checkNote says what is wrong with one stored note, or returns nil.
func checkNote(n string) error {
	switch {
	case strings.TrimSpace(n) == "":
		return errors.New("note is empty")
	case len(n) > MaxNoteBytes:
		return fmt.Errorf("note is %d bytes, over the %d-byte limit", len(n), MaxNoteBytes)
	case !utf8.ValidString(n):
		return errors.New("note is not valid UTF-8")
	case strings.ContainsAny(n, "\r\n"):
		return errors.New("note contains a line break")
	}
	return nil
}

// oneLine turns a note's line breaks into spaces, so that list_notes shows
// one note per line.
func oneLine(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	return strings.TrimSpace(s)
}

// store keeps each session's notes in a file of dir.
type store struct {
	dir   string
	locks keyLocks
}

// openStore creates dir (mode 0700) when missing and removes the temporary
// files an interrupted write left.
func openStore(dir string) (*store, error) {
	if dir == "" {
		return nil, errors.New("notes: Options.Dir is empty; name the directory the notes are kept in")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("notes: creating the notes directory %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("notes: notes directory %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("notes: %s is a file, not a directory; give a directory for the notes", dir)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"*"))
	for _, p := range leftovers {
		_ = os.Remove(p)
	}
	return &store{dir: dir}, nil
}

// tmpPrefix starts the names of files being written.
const tmpPrefix = ".tmp-"

// path is the file of a session: the hex SHA-256 of its id, so that no id,
// however hostile, names a file outside dir.
func (s *store) path(id string) string {
	h := sha256.Sum256([]byte(id))
	return filepath.Join(s.dir, hex.EncodeToString(h[:])+".json")
}

// read returns the session's notes; none when it has no file.
func (s *store) read(id string) ([]string, error) {
	data, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the notes: %w", err)
	}
	var f sessionFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("the notes file %s is damaged: %w", s.path(id), err)
	}
	if f.V != fileVersion || f.SessionID != id {
		return nil, fmt.Errorf("the notes file %s is not this session's (version %d); move it away", s.path(id), f.V)
	}
	return f.Notes, nil
}

// encode is the file content of a session.
func encode(id string, notes []string) []byte {
	data, err := json.Marshal(sessionFile{V: fileVersion, SessionID: id, Notes: notes})
	if err != nil {
		panic(err) // strings only
	}
	return data
}

// write replaces the session's file with data: a temporary file (mode
// 0600) written and synced, renamed over the old one, then the directory
// synced, so that a crash leaves the old notes or the new ones.
func (s *store) write(id string, data []byte) error {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("writing the notes: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path(id))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing the notes: %w", err)
	}
	return s.syncDir()
}

// remove deletes the session's file, if any, durably.
func (s *store) remove(id string) error {
	if err := os.Remove(s.path(id)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing the notes: %w", err)
	}
	return s.syncDir()
}

// syncDir makes a rename or removal in dir durable.
func (s *store) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("syncing the notes directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the notes directory: %w", err)
	}
	return nil
}

// keyLocks is a mutex per key, kept only while someone holds or waits for
// it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu      sync.Mutex
	holders int
}

// lock locks key and returns its unlock.
func (l *keyLocks) lock(key string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{}
		l.m[key] = k
	}
	k.holders++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		if k.holders--; k.holders == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}
