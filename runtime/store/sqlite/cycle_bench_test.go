package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/internal/cpustat"
	"github.com/gorap/gorap/runtime/store"
)

// BenchmarkStoreCycle runs the store work of one runtime cycle, in the order
// the runtime does it: the tool's result is recorded (call, dedup key, call
// state, inbox), a slice loads the thread (row, inbox, new history, pending
// calls, a dedup key), the turn is saved (messages, call, retry timer, inbox
// consumed), and the new call is marked dispatched. One operation is one
// cycle of one of 32 threads looping at once, so that updates share commits
// as in the runtime; each update waits for its sync, so read allocs/op and
// cpu-µs/op (the process's CPU time per cycle) rather than ns/op.
func BenchmarkStoreCycle(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "rap.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var threads atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // 32 goroutines on 2 cores
	cpu0, cpuOK := cpustat.Process()
	b.RunParallel(func(pb *testing.PB) {
		thread := fmt.Sprintf("bench-thread-%d", threads.Add(1))
		if err := storeCycles(s, thread, pb.Next); err != nil {
			b.Error(err)
		}
	})
	if cpu, ok := cpustat.Process(); ok && cpuOK {
		b.ReportMetric(float64((cpu-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

// storeCycles runs cycles of thread while more says so.
func storeCycles(s *Store, thread string, more func() bool) error {
	ctx := context.Background()
	args := json.RawMessage(`{}`)
	call := func(n int) store.Call {
		return store.Call{ThreadID: thread, CallID: fmt.Sprintf("call_%d", n), ToolName: "work", Arguments: args,
			Toolset: "bench", Endpoint: "http://127.0.0.1:1/invoke", State: store.CallNew, Created: time.Now().UTC()}
	}
	var last int64
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: thread, Status: store.ThreadActive, Created: time.Now().UTC()}); err != nil {
			return err
		}
		msgs, err := tx.AppendMessages(thread, []store.Message{{Role: store.RoleUser, Text: "loop"},
			{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "call_0", Name: "work", Arguments: args}}}})
		if err != nil {
			return err
		}
		last = msgs[1].Seq
		return tx.PutCalls([]store.Call{call(0)})
	}); err != nil {
		return err
	}
	n := 0
	for more() {
		id := fmt.Sprintf("call_%d", n)
		result := store.ToolResult{CallID: id, Name: "work", Text: "ok"}
		payload, _ := json.Marshal(result)
		err := s.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Call(thread, id); err != nil {
				return err
			}
			if _, err := tx.SetCallState(thread, id, store.CallDone); err != nil {
				return err
			}
			_, err := tx.Enqueue(store.InboxItem{ThreadID: thread, Kind: store.KindToolResult, Payload: payload, DedupKey: "result:" + id})
			return err
		})
		if err != nil {
			return err
		}
		var items []store.InboxItem
		err = s.QuickView(ctx, func(tx store.Tx) error {
			if _, err := tx.Thread(thread); err != nil {
				return err
			}
			if items, err = tx.Queued(thread); err != nil {
				return err
			}
			tail, err := tx.HistorySince(thread, last)
			if err != nil {
				return err
			}
			if len(tail) > 0 {
				last = tail[len(tail)-1].Seq
			}
			if _, err := tx.PendingCalls(thread); err != nil {
				return err
			}
			_, err = tx.SeenKey("oauth:" + thread + ":" + id)
			return err
		})
		if err != nil {
			return err
		}
		n++
		next := call(n)
		err = s.Update(ctx, func(tx store.Tx) error {
			msgs, err := tx.AppendMessages(thread, []store.Message{{Role: store.RoleTool, ToolResults: []store.ToolResult{result}},
				{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: next.CallID, Name: "work", Arguments: args}}}})
			if err != nil {
				return err
			}
			next.TurnSeq = msgs[1].Seq
			if err := tx.PutCalls([]store.Call{next}); err != nil {
				return err
			}
			if err := tx.DeleteTimer("retry:" + thread); err != nil {
				return err
			}
			ids := make([]int64, len(items))
			for i, it := range items {
				ids[i] = it.ID
			}
			return tx.Consume(ids)
		})
		if err != nil {
			return err
		}
		err = s.Update(ctx, func(tx store.Tx) error {
			_, err := tx.SetCallState(thread, next.CallID, store.CallDispatched, store.CallNew)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
