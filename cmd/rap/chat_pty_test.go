//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// ptyOutput collects what the chat writes to its terminal.
type ptyOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *ptyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// startChatRuntime serves a runtime playing m over loopback.
func startChatRuntime(t *testing.T, m model.Provider) (*runtime.Runtime, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := runtime.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	rt, err := runtime.New(&runtime.Config{Store: st, PublicURL: srv.URL, Secret: secret, Model: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	handler = rt.Handler()
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt.Shutdown(ctx)
		srv.Close()
		st.Close()
	})
	return rt, srv.URL
}

// startChatInPty runs "rap chat" on a pseudo-terminal; done receives its
// exit.
func startChatInPty(t *testing.T, url, state string) (*os.File, *ptyOutput, chan error) {
	t.Helper()
	bin := buildRapBinary(t)
	cmd := exec.Command(bin, "chat", "--server", url)
	cmd.Env = append(os.Environ(), "TERM=xterm", "XDG_STATE_HOME="+state, "NO_COLOR=1", "RAP_TOKEN=")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	out := &ptyOutput{}
	go io.Copy(out, tty)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		err := <-done
		done <- err
		tty.Close()
	})
	return tty, out, done
}

// wait waits until the terminal shows want.
func (o *ptyOutput) wait(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(o.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the terminal within 60s:\n%q", want, o.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited waits for the chat's exit and returns its error.
func exited(t *testing.T, done chan error, out *ptyOutput) error {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("rap chat did not end; terminal:\n%q", out.String())
		return nil
	}
}

// slowModel answers only when released: a turn that lasts.
type slowModel struct {
	called  chan struct{}
	release chan struct{}
}

func (slowModel) Name() string         { return "slow (test model)" }
func (slowModel) SupportsImages() bool { return false }
func (m slowModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	m.called <- struct{}{}
	select {
	case <-m.release:
		return &model.Response{Text: "done thinking"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// In a real terminal, Ctrl-C while a turn runs stops waiting
// for it and shows the prompt again; Ctrl-C at the prompt exits 0.
func TestChatCtrlCInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the rap binary")
	}
	m := slowModel{called: make(chan struct{}, 10), release: make(chan struct{})}
	_, url := startChatRuntime(t, m)
	tty, out, done := startChatInPty(t, url, filepath.Join(t.TempDir(), "state"))
	t.Cleanup(func() { close(m.release) })
	out.wait(t, "you> ")
	io.WriteString(tty, "think hard\r")
	select {
	case <-m.called:
	case <-time.After(60 * time.Second):
		t.Fatal("the model was not called")
	}
	io.WriteString(tty, "\x03")
	out.wait(t, "interrupted; the turn goes on in the runtime")
	out.wait(t, "(Ctrl-C again, or Ctrl-C at the prompt, exits)\r\nyou> ")
	io.WriteString(tty, "\x03")
	if err := exited(t, done, out); err != nil {
		t.Fatalf("rap chat ended with %v; terminal:\n%q", err, out.String())
	}
}

// In a real terminal, rap chat edits lines with a line editor:
// an arrow key moves the cursor instead of reaching the model as an
// escape code, the line is kept in the history file (0600), and Ctrl-C at
// the prompt ends the chat with status 0.
func TestChatInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the rap binary")
	}
	rt, url := startChatRuntime(t, scripted.New([]scripted.Turn{{Text: "You said: {{last_user}}", Repeat: true}}))
	state := filepath.Join(t.TempDir(), "state")
	tty, out, done := startChatInPty(t, url, state)
	waitOut := func(want string) { t.Helper(); out.wait(t, want) }
	waitOut("you> ")
	// "helo", left arrow, "l": the line editor makes it "hello".
	if _, err := io.WriteString(tty, "helo\x1b[Dl\r"); err != nil {
		t.Fatal(err)
	}
	waitOut("You said: hello")
	waitOut("hello\r\nyou> ")
	if _, err := io.WriteString(tty, "\x03"); err != nil { // Ctrl-C at the prompt
		t.Fatal(err)
	}
	if err := exited(t, done, out); err != nil {
		t.Fatalf("rap chat ended with %v after Ctrl-C at the prompt; terminal:\n%q", err, out.String())
	}
	threads, err := rt.Threads(context.Background())
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads = %v, %v", threads, err)
	}
	msgs, _ := rt.History(context.Background(), threads[0].ID)
	var users []string
	for _, m := range msgs {
		if m.Role == api.RoleUser {
			users = append(users, m.Text)
		}
	}
	if b, _ := json.Marshal(users); string(b) != `["hello"]` {
		t.Errorf("user messages = %s, want [\"hello\"]: no escape code reaches the model", b)
	}
	fi, err := os.Stat(filepath.Join(state, "rap", "chat_history"))
	if err != nil {
		t.Fatalf("no history file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("history file mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(state, "rap", "chat_history")); !strings.Contains(string(b), "hello") {
		t.Errorf("history file = %q, want the line sent", b)
	}
}
