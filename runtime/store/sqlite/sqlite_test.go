package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

func open(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rap.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func update(t *testing.T, s *Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func view(t *testing.T, s *Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func mkThread(t *testing.T, s *Store, id, parent string) {
	t.Helper()
	update(t, s, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: id, ParentID: parent}) })
}

// Open sets WAL, synchronous=NORMAL (the store's syncer syncs the WAL
// before Update returns; see TestUpdateWaitsForSync) and foreign keys,
// records the schema version, and reopening applies nothing twice.
func TestOpenPragmasAndMigrations(t *testing.T) {
	s, path := open(t)
	var mode string
	var sync, fk, version int
	s.group.conn.QueryRowContext(context.Background(), `PRAGMA journal_mode`).Scan(&mode)
	s.group.conn.QueryRowContext(context.Background(), `PRAGMA synchronous`).Scan(&sync)
	s.group.conn.QueryRowContext(context.Background(), `PRAGMA foreign_keys`).Scan(&fk)
	s.group.conn.QueryRowContext(context.Background(), `SELECT version FROM schema_version`).Scan(&version)
	if mode != "wal" || sync != 1 || fk != 1 || version != SchemaVersion {
		t.Fatalf("journal_mode=%s synchronous=%d foreign_keys=%d version=%d", mode, sync, fk, version)
	}
	mkThread(t, s, "t1", "")
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var n int
	s2.group.conn.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM schema_version`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d schema_version rows", n)
	}
	view(t, s2, func(tx store.Tx) error {
		_, err := tx.Thread("t1")
		return err
	})
}

// A database written by a newer program is refused with a clear error.
func TestOpenRefusesNewerSchema(t *testing.T) {
	s, path := open(t)
	s.group.conn.ExecContext(context.Background(), `UPDATE schema_version SET version = 999`)
	s.Close()
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "newer than this program knows") {
		t.Fatalf("Open = %v", err)
	}
}

func TestThreads(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "root", "")
	mkThread(t, s, "child", "root")
	err := s.Update(context.Background(), func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "orphan", ParentID: "missing"}) })
	if err == nil {
		t.Fatal("a thread with an unknown parent was created (foreign keys off?)")
	}
	view(t, s, func(tx store.Tx) error {
		c, err := tx.Thread("child")
		if err != nil || c.ParentID != "root" || c.RootID != "root" || c.Status != store.ThreadActive {
			t.Errorf("child = %+v, %v", c, err)
		}
		if _, err := tx.Thread("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown thread: %v", err)
		}
		all, err := tx.ListThreads()
		if err != nil || len(all) != 2 {
			t.Errorf("list = %+v, %v", all, err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.SetThreadStatus("root", store.ThreadClosed) })
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.SetThreadStatus("nope", store.ThreadClosed) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("status of unknown thread: %v", err)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "t", "")
	in := []store.Message{
		{Role: store.RoleUser, Text: "hi"},
		{Role: store.RoleAssistant, Text: "calling", ToolCalls: []store.ToolCall{{ID: "c1", Name: "x", Arguments: json.RawMessage(`{"a":1}`), Display: "x(a=1)"}}},
		{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: "c1", Name: "x", Content: []rap.ContentItem{rap.ImageContent("AA==", "image/png")},
			DisplayAs: []rap.DisplaySegment{rap.TextSegment("shown")}, IsError: true}}},
	}
	var got []store.Message
	update(t, s, func(tx store.Tx) error {
		out, err := tx.AppendMessages("t", in[:2])
		if err != nil {
			return err
		}
		if out[0].Seq != 1 || out[1].Seq != 2 {
			t.Errorf("seqs = %d, %d", out[0].Seq, out[1].Seq)
		}
		_, err = tx.AppendMessages("t", in[2:])
		return err
	})
	view(t, s, func(tx store.Tx) error {
		var err error
		got, err = tx.History("t")
		return err
	})
	if len(got) != 3 || got[2].Seq != 3 {
		t.Fatalf("history = %+v", got)
	}
	for i := range in {
		in[i].ThreadID, in[i].Seq, in[i].Created = "t", int64(i+1), got[i].Created
	}
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
}

// A transaction whose function fails leaves nothing behind.
func TestUpdateRollsBack(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "t", "")
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx store.Tx) error {
		tx.AppendMessages("t", []store.Message{{Role: store.RoleUser, Text: "lost"}})
		tx.Enqueue(store.InboxItem{ThreadID: "t", Kind: store.KindUserMessage, DedupKey: "k"})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	view(t, s, func(tx store.Tx) error {
		h, _ := tx.History("t")
		q, _ := tx.Queued("t")
		seen, _ := tx.SeenKey("k")
		if len(h) != 0 || len(q) != 0 || seen {
			t.Errorf("rolled-back writes are visible: %d messages, %d queued, seen=%v", len(h), len(q), seen)
		}
		return nil
	})
}

// RAP RE-6 at the store level: a dedup key is accepted once, even after
// its item was consumed.
func TestInboxDedupAndConsume(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "a", "")
	mkThread(t, s, "b", "")
	enqueue := func(th, key string) bool {
		var added bool
		update(t, s, func(tx store.Tx) error {
			var err error
			added, err = tx.Enqueue(store.InboxItem{ThreadID: th, Kind: store.KindUserMessage, Payload: json.RawMessage(`{"text":"x"}`), DedupKey: key})
			return err
		})
		return added
	}
	if !enqueue("a", "k1") || !enqueue("b", "k2") || !enqueue("a", "k3") {
		t.Fatal("fresh keys refused")
	}
	if enqueue("a", "k1") {
		t.Fatal("duplicate key accepted")
	}
	var items []store.InboxItem
	view(t, s, func(tx store.Tx) error {
		threads, _ := tx.QueuedThreads()
		if fmt.Sprint(threads) != "[a b]" {
			t.Errorf("queued threads = %v", threads)
		}
		items, _ = tx.Queued("a")
		return nil
	})
	if len(items) != 2 || items[0].DedupKey != "k1" || items[1].DedupKey != "k3" || items[0].ID >= items[1].ID {
		t.Fatalf("queued = %+v", items)
	}
	update(t, s, func(tx store.Tx) error { return tx.Consume([]int64{items[0].ID, items[1].ID}) })
	// Consumed again: an error, and nothing changes.
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.Consume([]int64{items[0].ID}) }); !errors.Is(err, store.ErrConsumed) {
		t.Errorf("Consume of a consumed item: %v, want store.ErrConsumed", err)
	}
	if enqueue("a", "k1") {
		t.Fatal("a consumed key was accepted again")
	}
	view(t, s, func(tx store.Tx) error {
		q, _ := tx.Queued("a")
		if len(q) != 0 {
			t.Errorf("queued after consume = %+v", q)
		}
		return nil
	})
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Enqueue(store.InboxItem{ThreadID: "a", Kind: store.KindUserMessage})
		return err
	}); err == nil {
		t.Fatal("an item without a dedup key was accepted")
	}
}

// RAP CA-2, RE-6 at the store level: state transitions are conditional, so
// a cancelled or finished call never becomes pending again.
func TestCallStates(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "t", "")
	due := time.Now().Add(-time.Second).UTC()
	update(t, s, func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{
			{ThreadID: "t", CallID: "c1", ToolName: "x", Endpoint: "http://e", Toolset: "ts", TurnSeq: 2, Deadline: due},
			{ThreadID: "t", CallID: "c2", ToolName: "y", Endpoint: "http://e", Toolset: "ts", TurnSeq: 2, Deadline: due.Add(time.Hour)},
			{ThreadID: "t", CallID: "c3", ToolName: "z", Endpoint: "http://e", Toolset: "ts", TurnSeq: 2},
		})
	})
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{{ThreadID: "t", CallID: "c1", ToolName: "x"}})
	}); err == nil {
		t.Fatal("a duplicate call id was accepted")
	}
	view(t, s, func(tx store.Tx) error {
		d, _ := tx.DueCalls(time.Now())
		if len(d) != 1 || d[0].CallID != "c1" || !d[0].Deadline.Equal(due) {
			t.Errorf("due = %+v", d)
		}
		next, ok, _ := tx.NextDeadline()
		if !ok || !next.Equal(due) {
			t.Errorf("next deadline = %v %v", next, ok)
		}
		news, _ := tx.CallsInState(store.CallNew)
		if len(news) != 3 {
			t.Errorf("new calls = %d", len(news))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		if ok, _ := tx.SetCallState("t", "c1", store.CallCancelled, store.CallNew, store.CallDispatched); !ok {
			t.Error("cancel of a new call failed")
		}
		if ok, _ := tx.SetCallState("t", "c1", store.CallDispatched, store.CallNew); ok {
			t.Error("a cancelled call became dispatched")
		}
		if ok, _ := tx.SetCallState("t", "c1", store.CallDone, store.CallNew, store.CallDispatched); ok {
			t.Error("a cancelled call became done (RAP CA-2)")
		}
		if ok, _ := tx.SetCallState("t", "nope", store.CallDone); ok {
			t.Error("an unknown call changed")
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		c, _ := tx.Call("t", "c1")
		if c.State != store.CallCancelled {
			t.Errorf("c1 state = %s", c.State)
		}
		d, _ := tx.DueCalls(time.Now())
		if len(d) != 0 {
			t.Errorf("a cancelled call is still due: %+v", d)
		}
		if _, err := tx.Call("t", "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown call: %v", err)
		}
		return nil
	})
}

func TestSubscriptionsViewsTimers(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "t", "")
	now := time.Now().UTC()
	update(t, s, func(tx store.Tx) error {
		tx.PutSubscription(store.Subscription{ThreadID: "t", CallID: "c1", ToolName: "watch", State: store.SubscriptionActive})
		tx.PutSubscription(store.Subscription{ThreadID: "t", CallID: "c1", ToolName: "watch", State: store.SubscriptionFinal})
		tx.PutView(store.View{ThreadID: "t", ViewType: "progress", Content: json.RawMessage(`{"v":1}`)})
		tx.PutView(store.View{ThreadID: "t", ViewType: "progress", Content: json.RawMessage(`{"v":2}`)})
		tx.PutTimer(store.Timer{ID: "w1", ThreadID: "t", Kind: "sleep", Due: now.Add(-time.Second)})
		return tx.PutTimer(store.Timer{ID: "w2", ThreadID: "t", Kind: "sleep", Due: now.Add(time.Hour), Payload: json.RawMessage(`{"s":1}`)})
	})
	view(t, s, func(tx store.Tx) error {
		sub, err := tx.Subscription("t", "c1")
		if err != nil || sub.State != store.SubscriptionFinal {
			t.Errorf("subscription = %+v, %v", sub, err)
		}
		subs, _ := tx.ThreadSubscriptions("t")
		if len(subs) != 1 {
			t.Errorf("subscriptions = %+v", subs)
		}
		vs, _ := tx.ThreadViews("t")
		if len(vs) != 1 || string(vs[0].Content) != `{"v":2}` {
			t.Errorf("views = %+v (RAP VU-2: latest per type)", vs)
		}
		due, _ := tx.DueTimers(now)
		if len(due) != 1 || due[0].ID != "w1" {
			t.Errorf("due timers = %+v", due)
		}
		next, ok, _ := tx.NextTimer()
		if !ok || !next.Equal(now.Add(-time.Second)) {
			t.Errorf("next timer = %v", next)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.DeleteTimer("w1") })
	view(t, s, func(tx store.Tx) error {
		due, _ := tx.DueTimers(now)
		if len(due) != 0 {
			t.Errorf("deleted timer still due")
		}
		return nil
	})
}

// RAP TS-7 at the store level: manifests per session, and the most recent
// copy of a base URL across sessions.
func TestToolsetCache(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "s1", "")
	mkThread(t, s, "s2", "")
	t0 := time.Now().UTC()
	update(t, s, func(tx store.Tx) error {
		tx.PutToolset(store.CachedToolset{RootID: "s1", BaseURL: "http://a", Manifest: json.RawMessage(`{"v":1}`), Fetched: t0})
		return tx.PutToolset(store.CachedToolset{RootID: "s2", BaseURL: "http://a", Manifest: json.RawMessage(`{"v":2}`), Fetched: t0.Add(time.Second)})
	})
	view(t, s, func(tx store.Tx) error {
		c, err := tx.LatestToolset("http://a")
		if err != nil || string(c.Manifest) != `{"v":2}` || c.RootID != "s2" {
			t.Errorf("latest = %+v, %v", c, err)
		}
		if _, err := tx.LatestToolset("http://b"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown base URL: %v", err)
		}
		s1, _ := tx.SessionToolsets("s1")
		if len(s1) != 1 || string(s1[0].Manifest) != `{"v":1}` {
			t.Errorf("session s1 = %+v", s1)
		}
		return nil
	})
}

// Concurrent writers queue on the single write connection instead of
// failing with SQLITE_BUSY, and every write lands.
func TestConcurrentWriters(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "t", "")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			for j := 0; j < 10; j++ {
				errs <- s.Update(context.Background(), func(tx store.Tx) error {
					_, err := tx.Enqueue(store.InboxItem{ThreadID: "t", Kind: store.KindUserMessage, DedupKey: fmt.Sprintf("k%d-%d", i, j)})
					return err
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	view(t, s, func(tx store.Tx) error {
		q, _ := tx.Queued("t")
		if len(q) != 80 {
			t.Errorf("%d items, want 80", len(q))
		}
		return nil
	})
}

// The reader pool does not see uncommitted writes.
func TestReadersSeeCommittedState(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "t", "")
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- s.Update(context.Background(), func(tx store.Tx) error {
			tx.AppendMessages("t", []store.Message{{Role: store.RoleUser, Text: "pending"}})
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	view(t, s, func(tx store.Tx) error {
		h, _ := tx.History("t")
		if len(h) != 0 {
			t.Errorf("uncommitted message visible")
		}
		return nil
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	view(t, s, func(tx store.Tx) error {
		h, _ := tx.History("t")
		if len(h) != 1 {
			t.Errorf("committed message not visible")
		}
		return nil
	})
}

// BenchmarkEnqueue measures accepting one message durably: one
// transaction with a dedup check, an inbox row and an fsync'd commit.
func BenchmarkEnqueue(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "rap.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.Update(context.Background(), func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "t"}) })
	payload := json.RawMessage(`{"text":"hello"}`)
	i := 0
	for b.Loop() {
		i++
		err := s.Update(context.Background(), func(tx store.Tx) error {
			_, err := tx.Enqueue(store.InboxItem{ThreadID: "t", Kind: store.KindUserMessage, Payload: payload, DedupKey: fmt.Sprint("k", i)})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSliceCommit measures the write of one slice: append the input
// and the assistant turn, record a call, consume the inbox row.
func BenchmarkSliceCommit(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "rap.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.Update(context.Background(), func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "t"}) })
	i := 0
	for b.Loop() {
		i++
		err := s.Update(context.Background(), func(tx store.Tx) error {
			msgs, err := tx.AppendMessages("t", []store.Message{{Role: store.RoleUser, Text: "hi"},
				{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: fmt.Sprint("c", i), Name: "x", Arguments: json.RawMessage(`{}`)}}}})
			if err != nil {
				return err
			}
			if err := tx.PutCalls([]store.Call{{ThreadID: "t", CallID: fmt.Sprint("c", i), ToolName: "x", TurnSeq: msgs[1].Seq}}); err != nil {
				return err
			}
			return tx.Consume([]int64{int64(i)})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// A child thread shares its parent's history up to InheritSeq: it sees
// that prefix, then its own messages numbered after it, and never the
// parent's later messages; grandchildren inherit through their parent.
func TestInheritedHistory(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "p", "")
	msg := func(text string) store.Message { return store.Message{Role: store.RoleUser, Text: text} }
	update(t, s, func(tx store.Tx) error {
		if _, err := tx.AppendMessages("p", []store.Message{msg("p1"), msg("p2")}); err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: "c", ParentID: "p", InheritSeq: 2}); err != nil {
			return err
		}
		if _, err := tx.AppendMessages("p", []store.Message{msg("p3 later")}); err != nil {
			return err
		}
		if _, err := tx.AppendMessages("c", []store.Message{msg("c3")}); err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: "g", ParentID: "c", InheritSeq: 3}); err != nil {
			return err
		}
		_, err := tx.AppendMessages("g", []store.Message{msg("g4")})
		return err
	})
	texts := func(h []store.Message) string {
		var out []string
		for _, m := range h {
			out = append(out, fmt.Sprintf("%s:%d:%s", m.ThreadID, m.Seq, m.Text))
		}
		return strings.Join(out, " ")
	}
	view(t, s, func(tx store.Tx) error {
		for id, want := range map[string]string{
			"p": "p:1:p1 p:2:p2 p:3:p3 later",
			"c": "p:1:p1 p:2:p2 c:3:c3",
			"g": "p:1:p1 p:2:p2 c:3:c3 g:4:g4",
		} {
			h, err := tx.History(id)
			if err != nil {
				return err
			}
			if got := texts(h); got != want {
				t.Errorf("History(%s) = %q, want %q", id, got, want)
			}
			last, err := tx.LastSeq(id)
			if err != nil || last != h[len(h)-1].Seq {
				t.Errorf("LastSeq(%s) = %d, %v", id, last, err)
			}
		}
		return nil
	})
	err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "orphan", InheritSeq: 1})
	})
	if err == nil || !strings.Contains(err.Error(), "needs a parent") {
		t.Fatalf("inherit_seq without a parent: %v", err)
	}
}

// HistorySince returns exactly the messages History would return after a
// Seq, across the inherited prefix of a child thread, so a cached prefix
// plus HistorySince is the whole history.
func TestHistorySince(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "p", "")
	msg := func(text string) store.Message { return store.Message{Role: store.RoleUser, Text: text} }
	update(t, s, func(tx store.Tx) error {
		if _, err := tx.AppendMessages("p", []store.Message{msg("p1"), msg("p2"), msg("p3")}); err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: "c", ParentID: "p", InheritSeq: 2}); err != nil {
			return err
		}
		_, err := tx.AppendMessages("c", []store.Message{msg("c3"), msg("c4")})
		return err
	})
	view(t, s, func(tx store.Tx) error {
		for _, id := range []string{"p", "c", "nobody"} {
			all, err := tx.History(id)
			if err != nil {
				return err
			}
			for after := int64(-1); after <= 5; after++ {
				got, err := tx.HistorySince(id, after)
				if err != nil {
					return err
				}
				var want []store.Message
				for _, m := range all {
					if m.Seq > after {
						want = append(want, m)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("HistorySince(%s, %d) = %v, want %v", id, after, got, want)
				}
			}
		}
		return nil
	})
}

// PendingCalls lists only the calls still waiting for a result, of one
// thread, oldest first.
func TestPendingCalls(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "a", "")
	mkThread(t, s, "b", "")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	update(t, s, func(tx store.Tx) error {
		var calls []store.Call
		for i, st := range []store.CallState{store.CallNew, store.CallDispatched, store.CallDone, store.CallCancelled, store.CallDispatched} {
			calls = append(calls, store.Call{ThreadID: "a", CallID: fmt.Sprintf("c%d", i), ToolName: "t", State: st, Created: base.Add(time.Duration(5-i) * time.Second)})
		}
		calls = append(calls, store.Call{ThreadID: "b", CallID: "x", ToolName: "t", State: store.CallNew})
		return tx.PutCalls(calls)
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.PendingCalls("a")
		if err != nil {
			return err
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.CallID+":"+string(c.State))
		}
		if want := "c4:dispatched c1:dispatched c0:new"; strings.Join(ids, " ") != want {
			t.Errorf("PendingCalls(a) = %v, want %s", ids, want)
		}
		return nil
	})
}

// WriterStats counts every Update and the transactions that held them.
func TestWriterStats(t *testing.T) {
	s, _ := open(t)
	before := s.WriterStats()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			update(t, s, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: fmt.Sprintf("t%d", i)}) })
		}()
	}
	wg.Wait()
	// One Update that fails still counts; its transaction rolls back.
	s.Update(context.Background(), func(tx store.Tx) error { return errors.New("no") })
	got := s.WriterStats()
	if n := got.Updates - before.Updates; n != 21 {
		t.Fatalf("Updates = %d, want 21", n)
	}
	// At most one transaction per Update, plus one: the failing Update's
	// group is rolled back and run again without it (an empty attempt,
	// counted too) when no other Update shared it, as on a loaded machine.
	if n := got.Transactions - before.Transactions; n < 2 || n > 22 {
		t.Fatalf("Transactions = %d, want 2..22", n)
	}
	if got.Busy <= before.Busy || got.Commit <= before.Commit || got.Commit > got.Busy {
		t.Fatalf("Busy %v, Commit %v (before %v, %v)", got.Busy, got.Commit, before.Busy, before.Commit)
	}
}

// An Update that fails alone is one transaction, rolled back once: the
// group is not begun again when no other call is left to run (this made
// TestWriterStats count 22 transactions for 21 Updates now and then).
func TestWriterStatsFailedUpdateAlone(t *testing.T) {
	s, _ := open(t)
	before := s.WriterStats()
	if err := s.Update(context.Background(), func(tx store.Tx) error { return errors.New("no") }); err == nil || err.Error() != "no" {
		t.Fatalf("Update = %v, want the function's error", err)
	}
	if n := s.WriterStats().Transactions - before.Transactions; n != 1 {
		t.Fatalf("Transactions = %d for one failed Update, want 1", n)
	}
}

// A choice is taken at most once, and taking it removes it.
func TestTakeChoiceOnce(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "a", "")
	update(t, s, func(tx store.Tx) error {
		return tx.PutChoice(store.Choice{ThreadID: "a", CallID: "c1", ToolName: "t", Prompt: "pick", Choices: []string{"x", "y"}, Default: 1, ResponseURL: "http://h/r"})
	})
	update(t, s, func(tx store.Tx) error {
		c, err := tx.TakeChoice("a", "c1")
		if err != nil || c.Prompt != "pick" || len(c.Choices) != 2 || c.Default != 1 || c.ResponseURL != "http://h/r" {
			t.Fatalf("first take: %+v, %v", c, err)
		}
		if _, err := tx.TakeChoice("a", "c1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second take: %v, want ErrNotFound", err)
		}
		left, err := tx.ThreadChoices("a")
		if err != nil || len(left) != 0 {
			t.Fatalf("left: %v, %v", left, err)
		}
		return nil
	})
}

// Update returns only after a sync of the WAL that began after its commit,
// and the writer goes on with other groups meanwhile; a failed sync fails
// the Updates it covered and every later one, and loses nothing that was
// acknowledged before.
func TestUpdateWaitsForSync(t *testing.T) {
	var mu sync.Mutex
	gate := make(chan struct{})
	open := true // syncs pass until the gate is installed
	var fail error
	syncs := 0
	s, err := openWith(filepath.Join(t.TempDir(), "rap.db"), openOptions{sync: func() error {
		mu.Lock()
		g, o, f := gate, open, fail
		syncs++
		mu.Unlock()
		if !o {
			<-g
		}
		return f
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mkThread(t, s, "a", "")

	mu.Lock()
	open = false
	mu.Unlock()
	returned := make(chan error, 1)
	go func() {
		returned <- s.Update(context.Background(), func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "b"}) })
	}()
	// The thread is committed (a reader sees it) but Update has not returned.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		s.View(context.Background(), func(tx store.Tx) error { _, err = tx.Thread("b"); return nil })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Update was never committed")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-returned:
		t.Fatalf("Update returned (%v) before the WAL was synced", err)
	case <-time.After(50 * time.Millisecond):
	}
	// The next Update's function runs while the first sync is in flight;
	// it commits after that sync and returns after its own.
	second := make(chan error, 1)
	ranC := make(chan struct{})
	go func() {
		second <- s.Update(context.Background(), func(tx store.Tx) error {
			defer close(ranC)
			return tx.CreateThread(store.Thread{ID: "c"})
		})
	}()
	select {
	case <-ranC:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not run the next group while a sync was in flight")
	}
	select {
	case err := <-second:
		t.Fatalf("the second Update returned (%v) before any sync after its commit", err)
	case <-time.After(50 * time.Millisecond):
	}
	mu.Lock()
	open = true
	fail = nil
	close(gate)
	mu.Unlock()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}

	// A failed sync: the Update reports it, and later ones fail at once.
	mu.Lock()
	fail = errors.New("EIO")
	mu.Unlock()
	err = s.Update(context.Background(), func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "d"}) })
	if err == nil || !strings.Contains(err.Error(), "EIO") || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("Update after a failed sync: %v", err)
	}
	mu.Lock()
	fail = nil
	before := syncs
	mu.Unlock()
	ran := false
	err = s.Update(context.Background(), func(tx store.Tx) error { ran = true; return nil })
	if err == nil || ran || !strings.Contains(err.Error(), "EIO") {
		t.Fatalf("the store accepted a write after a failed sync: ran=%v err=%v", ran, err)
	}
	mu.Lock()
	after := syncs
	mu.Unlock()
	if after != before {
		t.Fatalf("a refused write synced (%d -> %d)", before, after)
	}
	// What was acknowledged before the failure is still there.
	view(t, s, func(tx store.Tx) error {
		for _, id := range []string{"a", "b", "c"} {
			if _, err := tx.Thread(id); err != nil {
				t.Errorf("thread %s: %v", id, err)
			}
		}
		return nil
	})
}

// In a group of concurrent Updates, the ones whose function fails leave
// nothing behind and get their own error; every other one commits exactly
// once, even though the group is run again after each failure.
func TestGroupFailuresAreIsolated(t *testing.T) {
	s, _ := open(t)
	mkThread(t, s, "t", "")
	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			errs[i] = s.Update(context.Background(), func(tx store.Tx) error {
				if _, err := tx.Enqueue(store.InboxItem{ThreadID: "t", Kind: store.KindUserMessage, DedupKey: fmt.Sprintf("k%d", i)}); err != nil {
					return err
				}
				if i%7 == 3 {
					return fmt.Errorf("update %d refuses", i)
				}
				return nil
			})
		})
	}
	wg.Wait()
	want := map[string]bool{}
	for i, err := range errs {
		switch {
		case i%7 == 3 && (err == nil || err.Error() != fmt.Sprintf("update %d refuses", i)):
			t.Errorf("update %d: err = %v, want its own error", i, err)
		case i%7 != 3 && err != nil:
			t.Errorf("update %d: %v", i, err)
		case i%7 != 3:
			want[fmt.Sprintf("k%d", i)] = true
		}
	}
	view(t, s, func(tx store.Tx) error {
		q, err := tx.Queued("t")
		if err != nil {
			return err
		}
		got := map[string]bool{}
		for _, it := range q {
			if got[it.DedupKey] {
				t.Errorf("%s enqueued twice", it.DedupKey)
			}
			got[it.DedupKey] = true
		}
		if len(got) != len(want) {
			t.Errorf("%d items, want %d", len(got), len(want))
		}
		for k := range want {
			if !got[k] {
				t.Errorf("%s missing", k)
			}
		}
		for i := 3; i < n; i += 7 {
			if seen, _ := tx.SeenKey(fmt.Sprintf("k%d", i)); seen {
				t.Errorf("the failed update %d left its key behind", i)
			}
		}
		return nil
	})
}

// A choice waiting in the file is found after a reopen, before any new
// choice is put (the store's "no choices" shortcut starts from the file).
func TestTakeChoiceAfterReopen(t *testing.T) {
	s, path := open(t)
	mkThread(t, s, "a", "")
	if _, err := func() (store.Choice, error) {
		var c store.Choice
		err := s.View(context.Background(), func(tx store.Tx) error {
			var err error
			c, err = tx.TakeChoice("a", "c1")
			return err
		})
		return c, err
	}(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty table: %v", err)
	}
	update(t, s, func(tx store.Tx) error {
		return tx.PutChoice(store.Choice{ThreadID: "a", CallID: "c1", ToolName: "t", Prompt: "pick", Choices: []string{"x"}})
	})
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	update(t, s2, func(tx store.Tx) error {
		c, err := tx.TakeChoice("a", "c1")
		if err != nil || c.Prompt != "pick" {
			t.Fatalf("after reopen: %+v, %v", c, err)
		}
		return nil
	})
}

// Checkpoints run on their own connection as writes go on, and the data
// they copy stays readable after a reopen.
func TestCheckpointsRunOffTheWriter(t *testing.T) {
	s, path := open(t)
	mkThread(t, s, "t", "")
	for i := 0; i < 3*checkpointEvery; i++ {
		update(t, s, func(tx store.Tx) error {
			_, err := tx.Enqueue(store.InboxItem{ThreadID: "t", Kind: store.KindUserMessage, DedupKey: fmt.Sprintf("k%d", i)})
			return err
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.WriterStats().Checkpoints < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoints after %d synced updates: %d", 3*checkpointEvery, s.WriterStats().Checkpoints)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	view(t, s2, func(tx store.Tx) error {
		q, err := tx.Queued("t")
		if len(q) != 3*checkpointEvery {
			t.Errorf("%d items after reopen, want %d", len(q), 3*checkpointEvery)
		}
		return err
	})
}

// QuickView sees what committed Updates wrote, never the writes of an
// Update that fails, returns its function's error, and refuses a
// cancelled context.
func TestQuickView(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	mkThread(t, s, "a", "")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var dirty, missing atomic.Int64
	for i := 0; i < 4; i++ {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.QuickView(ctx, func(tx store.Tx) error {
					if _, err := tx.Thread("ghost"); err == nil {
						dirty.Add(1)
					}
					if _, err := tx.Thread("a"); err != nil {
						missing.Add(1)
					}
					return nil
				})
			}
		})
	}
	for i := 0; i < 50; i++ {
		// Fails after writing: its thread must never be seen.
		s.Update(ctx, func(tx store.Tx) error {
			if err := tx.CreateThread(store.Thread{ID: "ghost"}); err != nil {
				return err
			}
			return errors.New("changed my mind")
		})
		update(t, s, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: fmt.Sprintf("t%d", i)}) })
	}
	close(stop)
	wg.Wait()
	if dirty.Load() != 0 || missing.Load() != 0 {
		t.Fatalf("QuickView saw a rolled-back thread %d times and missed a committed one %d times", dirty.Load(), missing.Load())
	}
	var n int
	if err := s.QuickView(ctx, func(tx store.Tx) error {
		th, err := tx.ListThreads()
		n = len(th)
		return err
	}); err != nil || n != 51 {
		t.Fatalf("QuickView after the writes: %d threads, %v", n, err)
	}
	boom := errors.New("boom")
	if err := s.QuickView(ctx, func(store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("QuickView error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.QuickView(cctx, func(store.Tx) error { t.Error("ran with a cancelled context"); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled QuickView: %v", err)
	}
	if st := s.WriterStats(); st.QuickViews < 3 {
		t.Fatalf("QuickViews counted: %d", st.QuickViews)
	}
}
