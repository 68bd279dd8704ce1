package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gorap/gorap/runtime/store"
)

// BenchmarkCreateThreads measures creating hibernating threads the way
// rap bench-idle does: per thread a row, a cached toolset, a user message
// and an assistant turn, and a dispatched call; one operation is one
// transaction of 1,000 threads. With random (version 4) ids each
// transaction touches a random page of every index keyed by thread id, so
// its cost grows with the number of threads already stored (run with
// -benchtime=100x and compare ns/thread); time-ordered ids
// (store.NewThreadID) append to those indexes.
func BenchmarkCreateThreads(b *testing.B) {
	for _, ids := range []struct {
		name string
		next func() string
	}{
		{"ids=time-ordered", store.NewThreadID},
		{"ids=random", uuid.NewString},
	} {
		b.Run(ids.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "rap.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			args := json.RawMessage(`{}`)
			manifest := json.RawMessage(`{"name":"bench","tools":[{"name":"work"}]}`)
			const batch = 1000
			for b.Loop() {
				err := s.Update(context.Background(), func(tx store.Tx) error {
					now := time.Now().UTC()
					for range batch {
						id := ids.next()
						if err := tx.CreateThread(store.Thread{ID: id, Status: store.ThreadActive, Created: now}); err != nil {
							return err
						}
						if err := tx.PutToolset(store.CachedToolset{RootID: id, BaseURL: "http://127.0.0.1:1", Manifest: manifest, Fetched: now}); err != nil {
							return err
						}
						msgs, err := tx.AppendMessages(id, []store.Message{
							{Role: store.RoleUser, Text: "wait for the tool"},
							{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "call_1", Name: "work", Arguments: args}}},
						})
						if err != nil {
							return err
						}
						if err := tx.PutCalls([]store.Call{{ThreadID: id, CallID: "call_1", ToolName: "work", Arguments: args,
							Toolset: "bench", Endpoint: "http://127.0.0.1:1/invoke", TurnSeq: msgs[1].Seq, State: store.CallDispatched, Created: now}}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/thread")
		})
	}
}
