package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/runtime/config"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// useProjectDataDir gives "rap serve" in a project (a working directory
// with .rap/rap.json) the project's own data directory, .rap/data, unless
// --data-dir or RAP_DATA_DIR chose one: two projects must not share one
// store, where each runtime would answer the other's threads with its own
// model and tools. A project data directory made here gets a .gitignore,
// so that the store and the callback key are never committed.
func useProjectDataDir(s *config.Settings, chosen bool) error {
	if chosen || getenvOS(config.EnvDataDir) != "" {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("find the working directory for the project's data dir: %w (pass --data-dir DIR)", err)
	}
	dir := config.ProjectDataDir(wd)
	if dir == "" {
		return nil
	}
	s.DataDir = dir
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := privfile.MkdirAll(dir); err != nil {
		return fmt.Errorf("create the project's data dir %s: %w (pass --data-dir DIR to use another)", dir, err)
	}
	ignore := filepath.Join(dir, ".gitignore")
	if err := os.WriteFile(ignore, []byte("# gorap's runtime store and callback key: never commit them.\n*\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", ignore, err)
	}
	return nil
}

// storeOpenError explains a failure to open the store in dataDir; a store
// another process holds names that process and the way out.
func storeOpenError(dataDir string, err error) error {
	var locked *sqlite.LockedError
	if !errors.As(err, &locked) {
		return fmt.Errorf("open the store in %s: %w", dataDir, err)
	}
	holder := "another process"
	if locked.PID > 0 {
		holder = fmt.Sprintf("another process (PID %d)", locked.PID)
	}
	return fmt.Errorf("data dir %s is in use by %s, probably another rap serve: one runtime per data directory (lock file %s). Stop that process, or pass --data-dir DIR (or set %s) to run this one with another directory",
		dataDir, holder, locked.Path, config.EnvDataDir)
}
