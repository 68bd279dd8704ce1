//go:build unix

package durable_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gorap/gorap/rap/durable"
)

// A tool server's database, which holds results and
// callback URLs, and its -wal and -shm files are 0600 even under a umask
// that lets everyone read.
func TestOpenFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "tool.db")
	st, err := durable.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", filepath.Base(p), m)
		}
	}
}
