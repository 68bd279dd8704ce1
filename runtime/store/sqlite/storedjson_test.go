package sqlite

import (
	"context"
	"testing"

	"github.com/gorap/gorap/runtime/store/storetest"
)

// New rows keep their JSON columns as TEXT, the type earlier releases
// wrote, each record with its format version (storetest.VersionedColumns).
func TestStoredJSONIsVersioned(t *testing.T) {
	s, _ := open(t)
	storetest.WriteVersionedRows(t, s)
	for q, want := range storetest.VersionedColumns {
		var got any // the driver gives TEXT as a string, a BLOB as []byte
		if err := s.group.conn.QueryRowContext(context.Background(), q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if text, ok := got.(string); !ok || text != want {
			t.Errorf("%s = %#v, want the TEXT %s", q, got, want)
		}
	}
}

// A row whose JSON has a format version this program does not read (a
// newer release wrote it) fails to read with an error naming the column
// and the version, instead of reading as zero values.
func TestStoredJSONOfAFutureVersionIsRefused(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "a", "")
	ctx := context.Background()
	if _, err := s.group.conn.ExecContext(ctx, `INSERT INTO messages (thread_id, seq, role, text, tool_results, created) VALUES ('a', 1, 'tool', '', ?, 1)`,
		storetest.FutureToolResults); err != nil {
		t.Fatal(err)
	}
	if _, err := s.group.conn.ExecContext(ctx, `INSERT INTO choices (thread_id, call_id, tool_name, prompt, choices, default_index, response_url, created)
		VALUES ('a', 'k1', 'ask', 'pick', ?, 0, '', 1)`, storetest.FutureChoices); err != nil {
		t.Fatal(err)
	}
	s.group.choices.Store(true) // a choice was written behind the store's back
	storetest.WantFutureVersionsRefused(t, s)
}
