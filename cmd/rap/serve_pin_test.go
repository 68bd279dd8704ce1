package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// RAP TS-11: rap serve applies the "sha256" of a toolset_server entry: a
// server whose discovery document has another digest is refused in the
// session, with both digests and the config file and entry to update,
// while a server pinned to its actual digest loads.
func TestServeRefusesToolsetWithWrongPin(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	good := startGettime(t, nil)
	_, raw, err := rap.FetchToolset(context.Background(), nil, good)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := rap.ToolsetDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("0", 64)
	cfg := filepath.Join(dir, "rap.json")
	write := func(pin string) {
		data := `{"tool_sets": [{"type": "toolset_server", "server_url": "` + good + `", "sha256": "` + pin + `"}]}`
		if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(wrong)
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), cfg)
	info, _, _, stop := runningServe(t, s)
	th, err := rapClient(t, info.URL, "").CreateThread(context.Background(), api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if th.Toolsets == nil || len(th.Toolsets.Loaded) != 0 || len(th.Toolsets.Errors) != 1 {
		t.Fatalf("toolsets = %+v, want the pinned server refused", th.Toolsets)
	}
	if msg := th.Toolsets.Errors[0]; !strings.Contains(msg, "sha256 "+digest) || !strings.Contains(msg, "pins sha256 "+wrong) ||
		!strings.Contains(msg, `update "sha256" in `+cfg+` (tool_sets[0]) to "`+digest+`"`) {
		t.Errorf("error %q lacks both digests or the file and entry to update", msg)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// With the digest it printed, the server loads.
	write(digest)
	info, _, _, _ = runningServe(t, s)
	th, err = rapClient(t, info.URL, "").CreateThread(context.Background(), api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if th.Toolsets == nil || !slices.Equal(th.Toolsets.Loaded, []string{"gettime"}) || len(th.Toolsets.Errors) != 0 {
		t.Fatalf("toolsets = %+v, want gettime loaded", th.Toolsets)
	}
}
