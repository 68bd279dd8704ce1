package fswatch_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorap/gorap/examples/fswatch"
)

// FuzzWatch decodes arbitrary watch_directory arguments: decoding never
// panics, and what it accepts is an existing directory given as an
// absolute, clean path.
func FuzzWatch(f *testing.F) {
	for _, seed := range []string{
		`{"path":"/"}`, `{"path":".","recursive":true}`, `{"path":""}`, `{"path":"/no/such"}`,
		`{"path":"../../etc"}`, `{"path":7}`, `null`, `[]`, `{"path":"/etc/passwd"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w fswatch.Watch
		if err := json.Unmarshal(data, &w); err != nil {
			return
		}
		if !filepath.IsAbs(w.Path) || filepath.Clean(w.Path) != w.Path {
			t.Fatalf("accepted path %q from %s", w.Path, data)
		}
		if fi, err := os.Stat(w.Path); err != nil || !fi.IsDir() {
			t.Fatalf("accepted %q, which is not a directory, from %s", w.Path, data)
		}
	})
}
