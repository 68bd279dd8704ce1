package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// Open sets WAL, synchronous=FULL and foreign keys, records the schema
// version, and reopening applies nothing twice.
func TestOpenPragmasAndMigrations(t *testing.T) {
	s, path := open(t)
	var mode string
	var sync, fk, version int
	s.writer.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	s.writer.QueryRow(`PRAGMA synchronous`).Scan(&sync)
	s.writer.QueryRow(`PRAGMA foreign_keys`).Scan(&fk)
	s.writer.QueryRow(`SELECT version FROM schema_version`).Scan(&version)
	if mode != "wal" || sync != 2 || fk != 1 || version != SchemaVersion {
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
	s2.writer.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n)
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
	s.writer.Exec(`UPDATE schema_version SET version = 999`)
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
	update(t, s, func(tx store.Tx) error { return tx.Consume([]int64{items[0].ID, items[1].ID, 9999}) })
	update(t, s, func(tx store.Tx) error { return tx.Consume([]int64{items[0].ID}) }) // idempotent
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
