package toolsjson

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// PinDigest (rap toolsjson digest) replaces the blake3 line of the
// [artifacts.tools] table and leaves the rest of the manifest as it was;
// without a manifest it writes one.
func TestPinDigest(t *testing.T) {
	dir := t.TempDir()
	tools := []byte(`{"version": 1, "tools": []}`)
	if err := os.WriteFile(filepath.Join(dir, ToolsFile), tools, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PinDigest(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	if !strings.Contains(string(got), "[artifacts.tools]") || !strings.Contains(string(got), Digest(tools)) {
		t.Fatalf("new manifest:\n%s", got)
	}
	manifest := "name = \"x\"\n\n[artifacts.tools] # pinned\npath = \"tools.json\"\nblake3 = \"old\"\n\n[policy]\ncaps = []\n"
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PinDigest(dir); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(dir, ManifestFile))
	want := strings.Replace(manifest, `blake3 = "old"`, `blake3 = "`+Digest(tools)+`"`, 1)
	if string(got) != want {
		t.Fatalf("manifest:\n%s\nwant:\n%s", got, want)
	}
	if err := PinDigest(t.TempDir()); err == nil || !strings.Contains(err.Error(), "rap toolsjson init") {
		t.Errorf("without tools.json: %v", err)
	}
}
