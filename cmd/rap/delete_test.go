package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// rap delete against a running rap serve: without --yes and without a
// terminal it deletes nothing and says to pass --yes; with --yes it
// deletes the named session and prints it and the count ("1 session",
// "2 sessions"); --user deletes every session of that user, archived ones
// included, and no other;
// an unknown session fails with status 1 and says why; bad arguments are
// status 2.
func TestDeleteVerb(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir))
	info, _, _, _ := runningServe(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := rapClient(t, info.URL, "")
	session := func(user string) string {
		th, err := c.CreateThread(ctx, api.CreateThreadRequest{UserID: user})
		if err != nil {
			t.Fatal(err)
		}
		return th.ID
	}
	gone := func(id string) bool {
		_, err := c.Thread(ctx, id)
		return errors.Is(err, client.ErrNotFound)
	}
	ada1, ada2, ada3, bob := session("ada"), session("ada"), session("ada"), session("bob")
	if _, err := c.ArchiveThread(ctx, ada3, true); err != nil { // --user deletes archived sessions too
		t.Fatal(err)
	}

	if !isTerminal(os.Stdin) {
		code, _, stderr := runVerb(t, ctx, "delete", "--server", info.URL, ada1)
		if code != exitUsage || !strings.Contains(stderr, "deleting 1 session cannot be undone") || !strings.Contains(stderr, "--yes") || !strings.Contains(stderr, "rap export SESSION -o FILE") {
			t.Errorf("without --yes and a terminal: status %d, stderr %q; want 2 asking for --yes and naming rap export", code, stderr)
		}
		if gone(ada1) {
			t.Fatal("rap delete without --yes deleted the session")
		}
	}

	code, stdout, stderr := runVerb(t, ctx, "delete", "--yes", "--server", info.URL, ada1)
	if code != exitOK || !strings.Contains(stdout, "deleted session "+ada1+" (1 thread)\n") || !strings.Contains(stdout, "deleted 1 session, 1 thread\n") {
		t.Errorf("rap delete --yes %s: status %d\nstdout %q\nstderr %q", ada1, code, stdout, stderr)
	}
	if !gone(ada1) {
		t.Errorf("session %s still answers after rap delete", ada1)
	}

	code, stdout, stderr = runVerb(t, ctx, "delete", "--yes", "--server", info.URL, "--user", "ada")
	if code != exitOK || !strings.Contains(stdout, "deleted session "+ada2) || !strings.Contains(stdout, "deleted session "+ada3) || !strings.Contains(stdout, "deleted 2 sessions, 2 threads\n") {
		t.Errorf("rap delete --user ada: status %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	if !gone(ada2) || !gone(ada3) || gone(bob) {
		t.Errorf("after rap delete --user ada: ada's sessions gone = %v, %v (want true), bob's gone = %v (want false)", gone(ada2), gone(ada3), gone(bob))
	}
	code, stdout, _ = runVerb(t, ctx, "delete", "--yes", "--server", info.URL, "--user", "ada")
	if code != exitOK || !strings.Contains(stdout, "nothing to delete") {
		t.Errorf("rap delete --user ada again: status %d, stdout %q; want 0 saying nothing to delete", code, stdout)
	}

	code, _, stderr = runVerb(t, ctx, "delete", "--yes", "--server", info.URL, ada1)
	if code != exitFailure || !strings.Contains(stderr, "no such session") || !strings.Contains(stderr, "rap delete: 1 session not deleted") {
		t.Errorf("deleting a deleted session: status %d, stderr %q; want 1 saying there is no such session", code, stderr)
	}
	for _, args := range [][]string{{"delete", "--server", info.URL}, {"delete", "--yes", "--server", info.URL, "--user", "bob", bob}} {
		if code, _, stderr := runVerb(t, ctx, args...); code != exitUsage {
			t.Errorf("rap %s: status %d (%s), want 2", strings.Join(args, " "), code, stderr)
		}
	}
	if gone(bob) {
		t.Error("a refused rap delete deleted bob's session")
	}
}

// The confirmation accepts yes or y, in any case, and nothing else; an
// empty input (end of file) is no.
func TestDeleteConfirm(t *testing.T) {
	for in, want := range map[string]bool{"yes\n": true, "Y\n": true, " YES \n": true, "no\n": false, "\n": false, "": false, "yess\n": false} {
		var out strings.Builder
		if got := confirm(strings.NewReader(in), &out, "Delete? "); got != want {
			t.Errorf("answer %q: confirmed = %v, want %v", in, got, want)
		}
		if !strings.HasPrefix(out.String(), "Delete? ") {
			t.Errorf("the prompt was not shown: %q", out.String())
		}
	}
}

// rap serve reads the retention from --retention, RAP_RETENTION and
// rap.json's "retention" (the flag and the variable win over the file),
// and refuses one under a minute.
func TestServeRetentionSetting(t *testing.T) {
	clearRAPEnv(t)
	s, err := serveSettingsFor("--retention", "720h")
	if err != nil || s.Retention == nil || *s.Retention != 720*time.Hour {
		t.Fatalf("--retention 720h: %v, %v", s.Retention, err)
	}
	t.Setenv("RAP_RETENTION", "48h")
	s, err = serveSettingsFor()
	if err != nil || s.Retention == nil || *s.Retention != 48*time.Hour {
		t.Fatalf("RAP_RETENTION=48h: %v, %v", s.Retention, err)
	}
	if _, err := serveSettingsFor("--retention", "10s"); err == nil || !strings.Contains(err.Error(), "at least 1m0s") {
		t.Errorf("--retention 10s: err = %v, want one naming the minimum", err)
	}
}
