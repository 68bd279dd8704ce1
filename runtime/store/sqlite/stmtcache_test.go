package sqlite

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"
)

// TestCyclesCompileNoStatement: once the writer has prepared a cycle's
// statements, further cycles compile none. SQLite calls a connection's
// authorizer whenever it compiles a statement, including when it compiles
// a prepared one again because it expired, and each time it runs an
// unprepared statement (BEGIN, COMMIT and ROLLBACK are prepared too, since
// parsing them was 1.4 % of rap serve's CPU). Before this test, the
// writer switched SQLite's query_only flag on and off around every group
// of reads, and setting a flag pragma expires every prepared statement:
// each cycle compiled its statements again.
func TestCyclesCompileNoStatement(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var compiled atomic.Int64
	var last atomic.Value
	err = s.group.conn.Raw(func(dc any) error {
		reg, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the driver's connection has no authorizer")
		}
		return reg.RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
			compiled.Add(1)
			last.Store([2]string{arg1, arg2})
			return sqlite.AuthorizerOK
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	cycles := func(n int) func() bool {
		return func() bool { n--; return n >= 0 }
	}
	// The first cycles prepare what they run (after their transaction).
	if err := storeCycles(s, "warm", cycles(3)); err != nil {
		t.Fatal(err)
	}
	compiled.Store(0)
	// A second thread, so that its first transaction counts too.
	if err := storeCycles(s, "second", cycles(20)); err != nil {
		t.Fatal(err)
	}
	if n := compiled.Load(); n != 0 {
		t.Errorf("20 cycles after 3 compiled statements %d times (last for %v); want none", n, last.Load())
	}
}

// TestIsSelect: the check that keeps a read-only view from writing.
func TestIsSelect(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1":                           true,
		"\n\t select id FROM calls":          true,
		"INSERT INTO x VALUES (1)":           false,
		"DELETE FROM choices RETURNING *":    false,
		"WITH d AS (DELETE FROM x) SELECT 1": false,
		"SELEC":                              false,
		"SELECT 1;":                          true,
		"SELECT 1; DELETE FROM threads":      false,
		"":                                   false,
	} {
		if got := isSelect(q); got != want {
			t.Errorf("isSelect(%q) = %v, want %v", q, got, want)
		}
	}
}
