package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// fillStore writes n sessions into the SQLite store of dir, each with a
// child thread, two messages and a pending call.
func fillStore(t *testing.T, dir string, n int) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(dir, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	err = st.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			root := fmt.Sprintf("s%04d", i)
			if err := tx.CreateThread(store.Thread{ID: root, Created: now.Add(time.Duration(i) * time.Millisecond), UserID: "u"}); err != nil {
				return err
			}
			if _, err := tx.AppendMessages(root, []store.Message{{Role: store.RoleUser, Text: "hello " + root}, {Role: store.RoleAssistant, Text: "hi"}}); err != nil {
				return err
			}
			if err := tx.CreateThread(store.Thread{ID: root + "-c", ParentID: root, InheritSeq: 2, Created: now.Add(time.Duration(i) * time.Millisecond)}); err != nil {
				return err
			}
			if err := tx.PutCalls([]store.Call{{ThreadID: root, CallID: "c1", ToolName: "t", Arguments: json.RawMessage(`{}`), Toolset: "ts", Endpoint: "http://ts", TurnSeq: 2, State: store.CallDispatched}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rap export --all --store reads every session of a store no runtime
// holds into a 0600 file, and rap import --store writes them into
// another store (PostgreSQL when the tests have one), where each session's
// threads, history and pending call are found; importing the same file
// again is refused and changes nothing; a store a runtime holds is
// refused with what to do instead.
func TestExportAllImportIntoAnotherStore(t *testing.T) {
	src := t.TempDir()
	fillStore(t, src, 30)
	file := filepath.Join(t.TempDir(), "all.jsonl")
	code, _, errOut := runCmd(t, "export", "--all", "--store", "sqlite:"+src, "-o", file)
	if code != 0 || !strings.Contains(errOut, "exported 30 sessions") {
		t.Fatalf("rap export --all: exit %d, stderr %q", code, errOut)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the archive file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	dest := "sqlite:" + t.TempDir()
	open := func() store.Store {
		st, err := sqlite.Open(filepath.Join(strings.TrimPrefix(dest, "sqlite:"), storeFile))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if url := pgtest.URL(t); url != "" {
		dest = url
		open = func() store.Store {
			st, err := postgres.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	code, _, errOut = runCmd(t, "import", file, "--store", dest)
	if code != 0 || !strings.Contains(errOut, "imported 30 sessions") {
		t.Fatalf("rap import: exit %d, stderr %q", code, errOut)
	}
	check := func() {
		st := open()
		defer st.Close()
		err := st.View(context.Background(), func(tx store.Tx) error {
			threads, err := tx.ListThreads()
			if err != nil {
				return err
			}
			if len(threads) != 60 {
				t.Errorf("the destination has %d threads; want 60", len(threads))
			}
			h, err := tx.History("s0017-c")
			if err != nil {
				return err
			}
			if len(h) != 2 || h[0].Text != "hello s0017" {
				t.Errorf("the child's inherited history at the destination = %+v", h)
			}
			c, err := tx.Call("s0029", "c1")
			if err != nil || c.State != store.CallDispatched {
				t.Errorf("the pending call at the destination = %+v, %v", c, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check()
	code, _, errOut = runCmd(t, "import", file, "--store", dest)
	if code == 0 || !strings.Contains(errOut, "already exist") || !strings.Contains(errOut, "imported 0 sessions") {
		t.Fatalf("a second import: exit %d, stderr %q; want a refusal saying the threads exist", code, errOut)
	}
	check()

	held, err := sqlite.Open(filepath.Join(src, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	code, _, errOut = runCmd(t, "export", "--all", "--store", "sqlite:"+src, "-o", filepath.Join(t.TempDir(), "x.jsonl"))
	if code == 0 || !strings.Contains(errOut, "in use") || !strings.Contains(errOut, "--server") {
		t.Fatalf("export from a held store: exit %d, stderr %q; want a refusal pointing at --server", code, errOut)
	}
}
