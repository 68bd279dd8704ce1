//go:build unix

package clientauth

import (
	"fmt"
	"os"
	"syscall"
)

// stat returns what tells one reading of the file from the next: its
// modification time, size and inode (a rename over it changes the inode).
func stat(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tokens file: %w", err)
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size(), perm: fi.Mode().Perm()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = uint64(sys.Ino)
	}
	return st, nil
}
