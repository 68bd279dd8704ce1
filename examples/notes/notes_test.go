package notes_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/notes"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// server is one notes server under test.
type server struct {
	*notes.Server
	url string
	dir string
	hs  *httptest.Server
}

// serve starts a notes server keeping its notes in a fresh directory.
func serve(t *testing.T, peerToken string) *server {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "notes")
	s, err := notes.New(&notes.Options{
		Dir:       dir,
		PeerToken: peerToken,
		Server:    &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &server{Server: s, url: hs.URL, dir: dir, hs: hs}
}

// runtime is a fake runtime that fails the test on a bad callback.
func runtime(t *testing.T) (context.Context, *raptest.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	rt := raptest.NewRuntime()
	t.Cleanup(func() {
		rt.Close()
		if errs := rt.Errors(); len(errs) > 0 {
			t.Errorf("the tool sent bad callbacks: %v", errs)
		}
	})
	return ctx, rt
}

// call invokes a tool and returns its result's text.
func call(t *testing.T, ctx context.Context, rt *raptest.Runtime, url, tool string, args any, opts ...raptest.InvokeOption) string {
	t.Helper()
	c, err := rt.Invoke(ctx, url, tool, args, opts...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res.Text
}

func add(t *testing.T, ctx context.Context, rt *raptest.Runtime, url, session, text string) string {
	t.Helper()
	return call(t, ctx, rt, url, "add_note", map[string]string{"text": text}, raptest.InThread(session))
}

func list(t *testing.T, ctx context.Context, rt *raptest.Runtime, url, session string) string {
	t.Helper()
	return call(t, ctx, rt, url, "list_notes", nil, raptest.InThread(session))
}

func TestAddAndList(t *testing.T) {
	s := serve(t, "")
	ctx, rt := runtime(t)
	ts, err := rt.Discover(ctx, s.url)
	if err != nil {
		t.Fatal(err)
	}
	if !ts.NeedsMigration {
		t.Error("the toolset does not say needsMigration: true")
	}
	if got := list(t, ctx, rt, s.url, "root"); got != "no notes yet" {
		t.Errorf("list of an empty session = %q", got)
	}
	if got := add(t, ctx, rt, s.url, "root", "buy milk"); got != "noted (1 note in this session)" {
		t.Errorf("first add = %q", got)
	}
	if got := add(t, ctx, rt, s.url, "root", "call Bob\r\nat noon\n"); got != "noted (2 notes in this session)" {
		t.Errorf("second add = %q", got)
	}
	if got := list(t, ctx, rt, s.url, "root"); got != "buy milk\ncall Bob at noon" {
		t.Errorf("list = %q, want the two notes one per line", got)
	}
	if got := add(t, ctx, rt, s.url, "root", " \n "); !strings.HasPrefix(got, "Error: ") {
		t.Errorf("a blank note = %q, want an error result", got)
	}

	// Private files in a private directory.
	fi, err := os.Stat(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("notes directory mode %o, want 700", fi.Mode().Perm())
	}
	files := notesFiles(t, s.dir)
	if len(files) != 1 {
		t.Fatalf("files %v, want one for the session", files)
	}
	if fi, err := os.Stat(filepath.Join(s.dir, files[0])); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("notes file: %v, mode %o, want 600", err, fi.Mode().Perm())
	}

	// The notes are on disk: a new server on the same directory has them.
	again, err := notes.New(&notes.Options{Dir: s.dir, Server: &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer again.Shutdown(ctx)
	hs := httptest.NewServer(again)
	defer hs.Close()
	if got := list(t, ctx, rt, hs.URL, "root"); got != "buy milk\ncall Bob at noon" {
		t.Errorf("list after a restart = %q", got)
	}
}

func TestNewNeedsADirectory(t *testing.T) {
	if _, err := notes.New(nil); err == nil || !strings.Contains(err.Error(), "Dir") {
		t.Errorf("New(nil) = %v, want an error naming Dir", err)
	}
	if _, err := notes.New(&notes.Options{}); err == nil || !strings.Contains(err.Error(), "Dir") {
		t.Errorf("New without Dir = %v, want an error naming Dir", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := notes.New(&notes.Options{Dir: file}); err == nil {
		t.Error("New accepted a file as its directory")
	}
}

// A session is the root thread: a child thread sees its root's notes, and
// another session sees none of them.
func TestSessionsAreApart(t *testing.T) {
	s := serve(t, "")
	ctx, rt := runtime(t)
	add(t, ctx, rt, s.url, "root-a", "a's note")
	add(t, ctx, rt, s.url, "root-b", "b's note")
	if got := list(t, ctx, rt, s.url, "root-b"); got != "b's note" {
		t.Errorf("session b lists %q", got)
	}
	child := call(t, ctx, rt, s.url, "add_note", map[string]string{"text": "from a child"},
		raptest.InThread("child"), raptest.WithAncestors("root-a", "middle"))
	if child != "noted (2 notes in this session)" {
		t.Errorf("add in a child thread = %q, want it counted in its root's session", child)
	}
	if got := list(t, ctx, rt, s.url, "root-a"); got != "a's note\nfrom a child" {
		t.Errorf("session a lists %q", got)
	}
	if got := list(t, ctx, rt, s.url, "child"); got != "no notes yet" {
		t.Errorf("the child's id as a root lists %q, want nothing", got)
	}
}

// notesFiles lists the files of dir, failing on any that is not a
// session's file (a hex SHA-256 and .json).
func notesFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !regexp.MustCompile(`^[0-9a-f]{64}\.json$`).MatchString(e.Name()) {
			t.Errorf("unexpected file %q in the notes directory", e.Name())
		}
		names = append(names, e.Name())
	}
	return names
}

// No session id, however hostile, names a file outside the directory;
// ids that cannot be one get an error result.
func TestHostileSessionIDs(t *testing.T) {
	s := serve(t, "")
	ctx, rt := runtime(t)
	parent := filepath.Dir(s.dir)
	opaque := []string{"../x", "../../../../tmp/owned", "/etc/passwd", `..\..\x`, ".", "..", "a/../../b", strings.Repeat("é", 128)}
	for _, id := range opaque {
		if got := add(t, ctx, rt, s.url, id, "note for "+id); got != "noted (1 note in this session)" {
			t.Errorf("session %q: add = %q", id, got)
		}
		if got := list(t, ctx, rt, s.url, id); got != "note for "+id {
			t.Errorf("session %q: list = %q", id, got)
		}
	}
	if n := len(notesFiles(t, s.dir)); n != len(opaque) {
		t.Errorf("%d files for %d sessions", n, len(opaque))
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("files beside the notes directory: %v", entries)
	}
	if _, err := os.Stat("/tmp/owned"); err == nil {
		t.Error("a file escaped to /tmp/owned")
	}

	refused := map[string]string{
		"NUL":            "a\x00b",
		"newline":        "a\nb",
		"too long":       strings.Repeat("x", notes.MaxSessionIDBytes+1),
		"in an ancestor": "",
	}
	for name, id := range refused {
		opts := []raptest.InvokeOption{raptest.InThread(id)}
		if name == "in an ancestor" {
			opts = []raptest.InvokeOption{raptest.InThread("child"), raptest.WithAncestors("root\x00")}
		}
		got := call(t, ctx, rt, s.url, "add_note", map[string]string{"text": "x"}, opts...)
		if !strings.HasPrefix(got, "Error: ") || !strings.Contains(got, "session id") {
			t.Errorf("%s: add = %q, want an error result about the session id", name, got)
		}
	}
	if n := len(notesFiles(t, s.dir)); n != len(opaque) {
		t.Errorf("%d files after refused ids, want %d", n, len(opaque))
	}
}
