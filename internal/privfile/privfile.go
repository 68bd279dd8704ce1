// Package privfile gives gorap's own files (databases, their -wal and -shm
// companions, lock files, keys) the mode 0600, whatever the umask, and its
// directories the mode 0700: what the runtime and tool servers store is
// conversations, results and credentials, for their owner only.
package privfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// FileMode is the mode of every file gorap creates for its data.
const FileMode fs.FileMode = 0o600

// DirMode is the mode of every data directory gorap creates.
const DirMode fs.FileMode = 0o700

// SQLite creates a database's -wal and -shm files with the mode of the
// database file itself; these are their suffixes.
var sqliteCompanions = []string{"-wal", "-shm", "-journal"}

// PrepareSQLite makes the SQLite database at path private before it is
// opened: it creates the file (empty, which SQLite takes for a new
// database) with mode 0600 when it is missing, and sets mode 0600 on the
// file and on its -wal, -shm and -journal files when they exist with
// another mode (a database made by an older gorap was 0644). SQLite gives
// the -wal and -shm files it creates later the database file's mode.
func PrepareSQLite(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return fmt.Errorf("create database file %s: %w", path, err)
	}
	err = restrict(f, path)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close database file %s: %w", path, cerr)
	}
	if err != nil {
		return err
	}
	return CheckSQLite(path)
}

// CheckSQLite sets mode 0600 on the -wal, -shm and -journal files of the
// database at path that exist with another mode.
func CheckSQLite(path string) error {
	for _, suffix := range sqliteCompanions {
		if err := Restrict(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Restrict sets mode 0600 on the file at path unless it has it already.
// A missing file is an error wrapping fs.ErrNotExist.
func Restrict(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() == FileMode {
		return nil
	}
	if err := os.Chmod(path, FileMode); err != nil {
		return fmt.Errorf("make %s private (mode 0600): %w", path, err)
	}
	return nil
}

// OpenFile opens (creating with mode 0600 when missing) the file at path
// with flag, and sets mode 0600 on it when the umask or an older gorap gave
// it another.
func OpenFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|os.O_CREATE, FileMode)
	if err != nil {
		return nil, err
	}
	if err := restrict(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// restrict sets mode 0600 on the open file f unless it has it already.
func restrict(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode().Perm() == FileMode {
		return nil
	}
	if err := f.Chmod(FileMode); err != nil {
		return fmt.Errorf("make %s private (mode 0600): %w", path, err)
	}
	return nil
}

// MkdirAll creates the directory dir, and any missing parents, with mode
// 0700 whatever the umask. It leaves the mode of a directory that already
// exists alone: the user chose it.
func MkdirAll(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	return os.Chmod(dir, DirMode)
}
