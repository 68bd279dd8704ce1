package archivestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/archive/archivestore"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// benchSessions is the size of the store the benchmarks move.
const benchSessions = 1000

// fillBench writes n sessions, each a root with a child thread, ten
// messages of about 200 bytes and a pending call.
func fillBench(b *testing.B, st store.Store, n int) {
	b.Helper()
	text := string(bytes.Repeat([]byte("x"), 200))
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			root := fmt.Sprintf("session-%05d", i)
			if err := tx.CreateThread(store.Thread{ID: root, Created: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
				return err
			}
			var msgs []store.Message
			for j := range 10 {
				role := store.RoleUser
				if j%2 == 1 {
					role = store.RoleAssistant
				}
				msgs = append(msgs, store.Message{Role: role, Text: text, Created: t0})
			}
			if _, err := tx.AppendMessages(root, msgs); err != nil {
				return err
			}
			if err := tx.CreateThread(store.Thread{ID: root + "-child", ParentID: root, InheritSeq: 10, Created: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
				return err
			}
			if err := tx.PutCalls([]store.Call{{ThreadID: root, CallID: "c1", ToolName: "t", Arguments: json.RawMessage(`{"a":1}`), Toolset: "ts", Endpoint: "http://ts", TurnSeq: 10, State: store.CallDispatched}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkExportImport1000Sessions exports a SQLite store of 1,000
// sessions to an archive and imports it into an empty store: SQLite, and
// PostgreSQL when GORAP_TEST_POSTGRES_URL is set. One op is the whole
// store; sessions/s is reported.
func BenchmarkExportImport1000Sessions(b *testing.B) {
	src, err := sqlite.Open(filepath.Join(b.TempDir(), "rap.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	fillBench(b, src, benchSessions)
	var archived bytes.Buffer
	ctx := context.Background()
	b.Run("export", func(b *testing.B) {
		for b.Loop() {
			archived.Reset()
			w, _ := archive.NewWriter(&archived, "bench")
			if err := archivestore.Export(ctx, src, w, nil, nil); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchSessions*b.N)/b.Elapsed().Seconds(), "sessions/s")
		b.ReportMetric(float64(archived.Len()), "archive-bytes")
	})
	dests := map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "rap.db"))
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	if pgtest.URL(b) != "" {
		dests["postgres"] = func(b *testing.B) store.Store { return pgtest.Open(b) }
	}
	for name, open := range dests {
		b.Run("import-"+name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dst := open(b)
				b.StartTimer()
				r, err := archive.NewReader(bytes.NewReader(archived.Bytes()))
				if err != nil {
					b.Fatal(err)
				}
				roots, err := archivestore.Import(ctx, dst, r, nil)
				if err != nil || len(roots) != benchSessions {
					b.Fatalf("imported %d sessions: %v", len(roots), err)
				}
				b.StopTimer()
				dst.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchSessions*b.N)/b.Elapsed().Seconds(), "sessions/s")
		})
	}
}
