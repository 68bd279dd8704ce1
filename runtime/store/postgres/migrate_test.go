package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// TestMigrations: Open records the schema version, a second Open (as a
// second process would) keeps the data, two processes opening a new
// database at once migrate it once, and a database from a newer gorap is
// refused with a plain message (versioned migrations).
func TestMigrations(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	opened := make(chan error, 2)
	for range 2 {
		go func() {
			s, err := postgres.Open(ctx, u)
			if err == nil {
				s.Close()
			}
			opened <- err
		}()
	}
	for range 2 {
		if err := <-opened; err != nil {
			t.Fatalf("two concurrent Opens of a new database: %v", err)
		}
	}
	s, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "kept"}) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// The pool's parser takes pgtest's pool_max_conns off the URL, which
	// the server would refuse as a parameter of a plain connection.
	pc, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v, rows int
	if err := conn.QueryRow(ctx, `SELECT version, (SELECT COUNT(*) FROM schema_version) FROM schema_version`).Scan(&v, &rows); err != nil {
		t.Fatal(err)
	}
	if v != postgres.SchemaVersion || rows != 1 {
		t.Errorf("schema_version = %d (%d rows), want %d in one row", v, rows, postgres.SchemaVersion)
	}
	s, err = postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx store.Tx) error { _, err := tx.Thread("kept"); return err }); err != nil {
		t.Errorf("a thread written before reopening: %v", err)
	}
	s.Close()
	if _, err := conn.Exec(ctx, `UPDATE schema_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, u); err == nil || !strings.Contains(err.Error(), "newer gorap") {
		t.Errorf("Open of a newer schema: %v, want an error saying to use a newer gorap", err)
	}
}

// TestOpenBadURL: a wrong address fails with a message that says what to
// check and never shows the password.
func TestOpenBadURL(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://gorap:hunter2@127.0.0.1:1/nodb?sslmode=disable&connect_timeout=5")
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "is PostgreSQL running") {
		t.Errorf("error %q does not say what to check", err)
	}
}
