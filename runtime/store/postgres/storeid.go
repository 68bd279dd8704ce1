package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// The store's id (store.Shared.StoreID) is derived from where the store
// lives, so that every process opening it derives the same one without a
// row to agree on: the cluster's system identifier (random at initdb, and
// kept by a standby that takes over), the database's name and the schema's.
// Restored into another cluster, the store gets another id. A server that
// refuses pg_control_system (some managed services) leaves the names alone.

// initID sets the store's id.
func (s *Store) initID(ctx context.Context) error {
	var system, database, schema string
	err := s.pool.QueryRow(ctx, `SELECT (SELECT system_identifier::text FROM pg_control_system()), current_database(), current_schema()`).
		Scan(&system, &database, &schema)
	if err != nil {
		system = ""
		err = s.pool.QueryRow(ctx, `SELECT current_database(), current_schema()`).Scan(&database, &schema)
	}
	if err != nil {
		return fmt.Errorf("postgres store %s: read the database's identity: %w", s.where, err)
	}
	sum := sha256.Sum256([]byte(system + "/" + database + "/" + schema))
	s.id = hex.EncodeToString(sum[:6])
	return nil
}

// StoreID implements store.Shared: 12 hex digits naming the cluster, the
// database and the schema.
func (s *Store) StoreID() string { return s.id }
