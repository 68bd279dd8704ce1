package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/config"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// openServeStore opens the store "rap serve" runs on: the
// SQLite file in the data dir by default, or the PostgreSQL database of
// --store / RAP_STORE. It returns the key to propose as the callback key
// when the store has none yet: for SQLite the data dir's callback.key
// (created when missing, as before), so that the callback URLs an older
// gorap handed out keep working; the key in the store wins from then on.
func openServeStore(ctx context.Context, s config.Settings) (st store.Store, proposedKey []byte, label string, err error) {
	if s.StoreIsPostgres() {
		pg, err := postgres.Open(ctx, s.Store)
		if err != nil {
			return nil, nil, "", fmt.Errorf("open the store %s: %w (check --store or %s)", config.StoreLabel(s.Store), err, config.EnvStore)
		}
		return pg, nil, "PostgreSQL " + pg.Where(), nil
	}
	path := filepath.Join(s.DataDir, storeFile)
	lite, err := sqlite.Open(path)
	if err != nil {
		return nil, nil, "", storeOpenError(s.DataDir, err)
	}
	key, err := runtime.LoadOrCreateSecret(s.DataDir)
	if err != nil {
		lite.Close()
		return nil, nil, "", err
	}
	return lite, key, "SQLite " + path, nil
}
