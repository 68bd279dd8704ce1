//go:build !unix

package clientauth

import (
	"fmt"
	"os"
)

// stat returns what tells one reading of the file from the next: its
// modification time and size.
func stat(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tokens file: %w", err)
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), perm: fi.Mode().Perm()}, nil
}
