package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// rap serve --store postgres://…: the tool round trip
// works on PostgreSQL, nothing of the store goes to the data dir, the
// callback key is kept in the database, and a second process on the same
// database (another data dir) serves the same threads.
func TestServePostgres(t *testing.T) {
	clearRAPEnv(t)
	u := pgtest.URL(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir, startGettime(t, nil)))
	s.Store = u
	info, stdout, _, stop := runningServe(t, s)
	wantLines(t, stdout.String(), "store:        PostgreSQL 127.0.0.1:",
		"leases:       15s, swept every 1s (a killed process's threads resume elsewhere within 16s)")
	c := rapClient(t, info.URL, "")
	th, err := c.CreateThread(context.Background(), api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(context.Background(), th.ID, "Time in Tokyo?"); err != nil {
		t.Fatal(err)
	}
	msgs := waitAnswer(t, info.URL, th.ID, "+09:00")
	if len(msgs) != 4 {
		t.Errorf("history has %d messages, want user, call, result, answer: %s", len(msgs), jsonString(msgs))
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, storeFile)); err == nil {
		t.Errorf("rap serve --store postgres://… created the SQLite file %s", storeFile)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	st, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.View(context.Background(), func(tx store.Tx) error {
		k, err := tx.CallbackKeys()
		if err == nil && len(k.Current) < 16 {
			t.Errorf("the stored callback key has %d bytes", len(k.Current))
		}
		return err
	}); err != nil {
		t.Errorf("the callback key is not in the database: %v", err)
	}

	// Another process, another data dir, the same database.
	s2 := s
	s2.DataDir = filepath.Join(t.TempDir(), "data2")
	info2, _, _, _ := runningServe(t, s2)
	if got := getHistoryAuth(t, info2.URL, th.ID, ""); len(got) != len(msgs) {
		t.Errorf("the second process reads %d messages of the thread, want %d", len(got), len(msgs))
	}
}
