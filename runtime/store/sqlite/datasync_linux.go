package sqlite

import (
	"os"
	"syscall"
)

// dataSync flushes f's data, and the metadata needed to read it back, to
// disk (fdatasync, as SQLite itself uses on Linux).
func dataSync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
