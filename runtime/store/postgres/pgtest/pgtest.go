// Package pgtest gives tests a PostgreSQL store of their own: a fresh
// schema in the database GORAP_TEST_POSTGRES_URL names, dropped when the
// test ends, so tests run in parallel and leave nothing behind.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gorap/gorap/runtime/store/postgres"
)

// EnvURL is the environment variable naming the test database.
const EnvURL = "GORAP_TEST_POSTGRES_URL"

// URL returns a connection URL to a new, empty schema of the test
// database, dropped when t ends; it skips t when EnvURL is unset.
func URL(t testing.TB) string {
	t.Helper()
	base := Require(t)
	b := make([]byte, 8)
	rand.Read(b)
	schema := "gorap_test_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := connect(ctx, base)
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, base, schema)
}

// connect opens a plain connection to base, leaving out the pool's
// settings (pool_max_conns), which the server would refuse as parameters.
func connect(ctx context.Context, base string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}

// Require skips t unless EnvURL is set, and returns its value.
func Require(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skipf("PostgreSQL tests skipped: set %s (such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run them", EnvURL)
	}
	return base
}

// PoolMaxConns is the pool size of the stores opened on a URL from URL,
// unless EnvURL sets pool_max_conns. The store's default (16) is sized for
// a server; tests open up to three stores at once, and test packages run
// in parallel against one server, whose max_connections (100 by default)
// three runtimes and three replicas of 16 each could exhaust ("too many
// clients already").
const PoolMaxConns = 4

// withSearchPath adds search_path=schema, and pool_max_conns unless set,
// to a URL or key=value string.
func withSearchPath(t testing.TB, base, schema string) string {
	setPool := !strings.Contains(base, "pool_max_conns")
	if !strings.Contains(base, "://") {
		s := base + " search_path=" + schema
		if setPool {
			s += " pool_max_conns=" + strconv.Itoa(PoolMaxConns)
		}
		return s
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	if setPool {
		q.Set("pool_max_conns", strconv.Itoa(PoolMaxConns))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Open opens a store on a new schema (see URL); it is closed when t
// ends.
func Open(t testing.TB) *postgres.Store {
	t.Helper()
	u := URL(t)
	s, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("open the PostgreSQL store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
