package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// rap migrate moves a session between two running rap serve processes,
// naming the destination by a remote of the source's rap.json whose token
// comes from the environment; the source then answers for the session
// with its new address, the destination serves it, and an unknown remote
// is refused with the names that exist.
func TestMigrateVerbMovesASessionToARemote(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	script := writeScript(t, dir, `{"turns": [{"text": "ok", "repeat": true}]}`)
	dest, _, _, _ := runningServe(t, baseSettings(t, "scripted:"+script, writeConfig(t, t.TempDir())))
	t.Setenv("RAP_TEST_REMOTE_TOKEN", "unused-by-a-loopback-destination")
	cfg := filepath.Join(dir, "source.json")
	if err := os.WriteFile(cfg, []byte(`{"tool_sets": [], "remotes": {"office": {"url": "`+dest.URL+`", "token_env": "RAP_TEST_REMOTE_TOKEN"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	src, _, _, _ := runningServe(t, baseSettings(t, "scripted:"+script, cfg))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := rapClient(t, src.URL, "")
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, th.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, src.URL, th.ID, "ok")

	code, _, stderr := runVerb(t, ctx, "migrate", th.ID, "--to", "elsewhere", "--server", src.URL)
	if code == exitOK || !strings.Contains(stderr, "office") {
		t.Fatalf("rap migrate --to an unknown remote: status %d, stderr %q; want a refusal naming the remote office", code, stderr)
	}
	code, stdout, stderr := runVerb(t, ctx, "migrate", th.ID, "--to", "office", "--server", src.URL)
	if code != exitOK || !strings.Contains(stdout, "moved session "+th.ID+" to "+dest.URL) || !strings.Contains(stdout, "rap chat --server "+dest.URL) {
		t.Fatalf("rap migrate: status %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	msgs := getHistoryAuth(t, dest.URL, th.ID, "")
	if len(msgs) < 2 || msgs[0].Text != "hello" {
		t.Fatalf("the destination's history of the moved session = %+v", msgs)
	}
	if _, err := c.Thread(ctx, th.ID); !errors.Is(err, client.ErrMoved) {
		t.Fatalf("the source's answer for the moved session: %v; want ErrMoved", err)
	}
	code, _, stderr = runVerb(t, ctx, "migrate", th.ID, "--to", "office", "--server", src.URL)
	if code == exitOK || !strings.Contains(stderr, "moved already") {
		t.Fatalf("moving a moved session again: status %d, stderr %q; want it to say where the session is", code, stderr)
	}
}
