package postgres_test

import (
	"context"
	"testing"

	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
	"github.com/gorap/gorap/runtime/store/storetest"
)

// New rows keep their JSON columns as BYTEA, each record with its format
// version (storetest.VersionedColumns).
func TestStoredJSONIsVersioned(t *testing.T) {
	u := pgtest.URL(t)
	s, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.WriteVersionedRows(t, s)
	conn := rawConn(t, u)
	for q, want := range storetest.VersionedColumns {
		var got []byte
		if err := conn.QueryRow(context.Background(), q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if string(got) != want {
			t.Errorf("%s = %s, want %s", q, got, want)
		}
	}
}

// A row whose JSON has a format version this program does not read (a
// newer release wrote it) fails to read with an error naming the column
// and the version, instead of reading as zero values.
func TestStoredJSONOfAFutureVersionIsRefused(t *testing.T) {
	u := pgtest.URL(t)
	s, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := rawConn(t, u)
	ctx := context.Background()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO threads (id, root_id, status, created) VALUES ('a', 'a', 'active', now())`, nil},
		{`INSERT INTO messages (thread_id, seq, role, text, tool_results, created) VALUES ('a', 1, 'tool', '', $1, now())`,
			[]any{[]byte(storetest.FutureToolResults)}},
		{`INSERT INTO choices (thread_id, call_id, tool_name, prompt, choices, default_index, response_url, created)
			VALUES ('a', 'k1', 'ask', 'pick', $1, 0, '', now())`, []any{[]byte(storetest.FutureChoices)}},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	storetest.WantFutureVersionsRefused(t, s)
}
