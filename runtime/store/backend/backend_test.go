package backend

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// memStore is an in-memory HistoryReader and Queue.
type memStore struct {
	threads map[string]store.Thread
	msgs    map[string][]store.Message
	seen    map[string]bool
	queued  []store.InboxItem
}

func newMemStore() *memStore {
	return &memStore{threads: map[string]store.Thread{}, msgs: map[string][]store.Message{}, seen: map[string]bool{}}
}

func (m *memStore) Thread(id string) (store.Thread, error) {
	th, ok := m.threads[id]
	if !ok {
		return th, fmt.Errorf("thread %s: %w", id, store.ErrNotFound)
	}
	return th, nil
}

func (m *memStore) OwnMessages(threadID string, after, upTo int64) ([]store.Message, error) {
	var out []store.Message
	for _, msg := range m.msgs[threadID] {
		if msg.Seq > after && (upTo < 0 || msg.Seq <= upTo) {
			out = append(out, msg)
		}
	}
	return out, nil
}

func (m *memStore) MarkKeySeen(_, key string) (bool, error) {
	if m.seen[key] {
		return false, nil
	}
	m.seen[key] = true
	return true, nil
}

func (m *memStore) InsertInboxItem(item store.InboxItem) (bool, error) {
	m.queued = append(m.queued, item)
	return true, nil
}

// add creates a thread with messages numbered from its InheritSeq.
func (m *memStore) add(th store.Thread, texts ...string) {
	m.threads[th.ID] = th
	for i, text := range texts {
		m.msgs[th.ID] = append(m.msgs[th.ID], store.Message{ThreadID: th.ID, Seq: th.InheritSeq + int64(i) + 1, Text: text})
	}
}

func texts(msgs []store.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, fmt.Sprintf("%s:%d:%s", m.ThreadID, m.Seq, m.Text))
	}
	return strings.Join(out, " ")
}

// The history of a child is its ancestors' messages up to each one's
// InheritSeq, then its own; HistorySince returns exactly the part of it
// after a Seq; an unknown thread's history is empty.
func TestHistoryWalk(t *testing.T) {
	m := newMemStore()
	m.add(store.Thread{ID: "p"}, "p1", "p2", "p3")
	m.add(store.Thread{ID: "c", ParentID: "p", InheritSeq: 2}, "c3", "c4")
	m.add(store.Thread{ID: "g", ParentID: "c", InheritSeq: 3}, "g4")
	m.add(store.Thread{ID: "fresh", ParentID: "p"}, "f1")
	for id, want := range map[string]string{
		"p":      "p:1:p1 p:2:p2 p:3:p3",
		"c":      "p:1:p1 p:2:p2 c:3:c3 c:4:c4",
		"g":      "p:1:p1 p:2:p2 c:3:c3 g:4:g4",
		"fresh":  "fresh:1:f1",
		"nobody": "",
	} {
		all, err := History(m, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(all); got != want {
			t.Errorf("History(%s) = %q, want %q", id, got, want)
		}
		for after := int64(-1); after <= 5; after++ {
			since, err := HistorySince(m, id, after)
			if err != nil {
				t.Fatal(err)
			}
			var tail []store.Message
			for _, msg := range all {
				if msg.Seq > after {
					tail = append(tail, msg)
				}
			}
			if texts(since) != texts(tail) {
				t.Errorf("HistorySince(%s, %d) = %q, want %q", id, after, texts(since), texts(tail))
			}
		}
	}
}

// A cycle of inheriting threads, which CreateThread cannot make but a
// damaged store may hold, ends the walk with an error instead of looping.
func TestHistoryWalkStopsAtACycle(t *testing.T) {
	m := newMemStore()
	m.add(store.Thread{ID: "a", ParentID: "b", InheritSeq: 1}, "a2")
	m.add(store.Thread{ID: "b", ParentID: "a", InheritSeq: 1}, "b2")
	if _, err := History(m, "a"); err == nil || !strings.Contains(err.Error(), "inherited levels") {
		t.Errorf("History over a cycle = %v, want an error about inherited levels", err)
	}
}

// NewThread fills in the defaults and the parent's session and user, and
// refuses what CreateThread may not store.
func TestNewThread(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := newMemStore()
	m.add(store.Thread{ID: "root", RootID: "root", UserID: "ada"})
	th, err := NewThread(store.Thread{ID: "root2"}, now, m)
	if err != nil || th.RootID != "root2" || th.Status != store.ThreadActive || !th.Created.Equal(now) {
		t.Errorf("a root thread = %+v, %v; want its own root, active, created now", th, err)
	}
	th, err = NewThread(store.Thread{ID: "kid", ParentID: "root", Created: now.Add(time.Hour), Status: store.ThreadClosed}, now, m)
	if err != nil || th.RootID != "root" || th.UserID != "ada" || th.Status != store.ThreadClosed || !th.Created.Equal(now.Add(time.Hour)) {
		t.Errorf("a child = %+v, %v; want the parent's root and user, its own status and time", th, err)
	}
	th, err = NewThread(store.Thread{ID: "kid", ParentID: "root", UserID: "bob"}, now, m)
	if err != nil || th.UserID != "bob" {
		t.Errorf("a child with its own user = %+v, %v; want user bob", th, err)
	}
	if _, err := NewThread(store.Thread{ID: "kid", ParentID: "gone"}, now, m); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a child of a missing parent: %v, want store.ErrNotFound", err)
	}
	for _, bad := range []store.Thread{{}, {ID: "x", InheritSeq: 1}, {ID: "x", ParentID: "root", InheritSeq: -1}} {
		if _, err := NewThread(bad, now, m); err == nil {
			t.Errorf("NewThread(%+v) succeeded; want an error", bad)
		}
	}
}

// Enqueue marks the key seen unless the item is Once, adds nothing for a
// key seen before, fills in the payload and the time, and refuses an item
// without thread, kind or key.
func TestEnqueue(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := newMemStore()
	item := store.InboxItem{ThreadID: "t", Kind: store.KindWake, DedupKey: "k1"}
	if added, err := Enqueue(m, item, now); err != nil || !added {
		t.Fatalf("first Enqueue = %v, %v", added, err)
	}
	if added, err := Enqueue(m, item, now); err != nil || added {
		t.Errorf("Enqueue of a seen key = %v, %v; want not added", added, err)
	}
	once := store.InboxItem{ThreadID: "t", Kind: store.KindToolResult, DedupKey: "k2", Payload: []byte(`{}`), Once: true}
	if added, err := Enqueue(m, once, now); err != nil || !added || m.seen["k2"] {
		t.Errorf("Enqueue of a Once item = %v, %v, seen %v; want added, key not marked", added, err, m.seen["k2"])
	}
	if len(m.queued) != 2 || string(m.queued[0].Payload) != "null" || !m.queued[0].Created.Equal(now) || string(m.queued[1].Payload) != "{}" {
		t.Errorf("queued %+v; want the wake with payload null at now, then the result", m.queued)
	}
	for _, bad := range []store.InboxItem{{Kind: store.KindWake, DedupKey: "x"}, {ThreadID: "t", DedupKey: "x"}, {ThreadID: "t", Kind: store.KindWake}} {
		if _, err := Enqueue(m, bad, now); err == nil {
			t.Errorf("Enqueue(%+v) succeeded; want an error", bad)
		}
	}
}

// NewCall fills in the state, the arguments and the times.
func TestNewCall(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewCall(store.Call{ThreadID: "t", CallID: "c"}, now)
	if c.State != store.CallNew || string(c.Arguments) != "{}" || !c.Created.Equal(now) || !c.Updated.Equal(now) {
		t.Errorf("NewCall = %+v; want state new, arguments {}, created and updated now", c)
	}
	c = NewCall(store.Call{State: store.CallDispatched, Arguments: []byte(`{"a":1}`), Created: now.Add(-time.Hour)}, now)
	if c.State != store.CallDispatched || string(c.Arguments) != `{"a":1}` || !c.Created.Equal(now.Add(-time.Hour)) {
		t.Errorf("NewCall kept %+v; want its state, arguments and time", c)
	}
}

// PendingCondition, the SQL the stores query pending calls with, names
// exactly the states store.CallState.Pending counts as pending.
func TestPendingConditionMatchesCallStatePending(t *testing.T) {
	var inSQL []store.CallState
	for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(PendingCondition, -1) {
		inSQL = append(inSQL, store.CallState(m[1]))
	}
	var pending []store.CallState
	for _, s := range []store.CallState{store.CallNew, store.CallDispatched, store.CallDone, store.CallCancelled} {
		if s.Pending() {
			pending = append(pending, s)
		}
	}
	slices.Sort(inSQL)
	slices.Sort(pending)
	if !slices.Equal(inSQL, pending) {
		t.Errorf("PendingCondition %q names %v; store.CallState.Pending is true for %v", PendingCondition, inSQL, pending)
	}
}

// memWriter is a MessageWriter over a memStore.
type memWriter struct {
	*memStore
	inserted int
}

func (w *memWriter) LastSeq(threadID string) (int64, error) {
	th := w.threads[threadID]
	last := th.InheritSeq
	for _, m := range w.msgs[threadID] {
		last = max(last, m.Seq)
	}
	return last, nil
}

func (w *memWriter) InsertMessages(threadID string, msgs []store.Message) error {
	w.inserted++
	w.msgs[threadID] = append(w.msgs[threadID], msgs...)
	return nil
}

// AppendMessages numbers the messages after the thread's last Seq, the
// inherited ones included, stamps the ones without a time, returns them
// as stored and leaves the caller's slice alone; no messages, no insert.
func TestAppendMessages(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := &memWriter{memStore: newMemStore()}
	w.add(store.Thread{ID: "p"}, "p1", "p2")
	w.add(store.Thread{ID: "c", ParentID: "p", InheritSeq: 2})
	msgs := []store.Message{{Text: "c3"}, {Text: "c4", Created: now.Add(-time.Hour)}}
	out, err := AppendMessages(w, "c", msgs, now)
	if err != nil {
		t.Fatal(err)
	}
	if texts(out) != "c:3:c3 c:4:c4" || !out[0].Created.Equal(now) || !out[1].Created.Equal(now.Add(-time.Hour)) {
		t.Errorf("AppendMessages = %+v; want c:3 stamped now, c:4 with its own time", out)
	}
	if msgs[0].Seq != 0 || msgs[0].ThreadID != "" || !msgs[0].Created.IsZero() {
		t.Errorf("AppendMessages changed its argument: %+v", msgs[0])
	}
	if h, _ := History(w, "c"); texts(h) != "p:1:p1 p:2:p2 c:3:c3 c:4:c4" {
		t.Errorf("History after the append = %q", texts(h))
	}
	if out, err := AppendMessages(w, "c", nil, now); out != nil || err != nil || w.inserted != 1 {
		t.Errorf("AppendMessages of nothing = %v, %v, with %d inserts; want nothing and no insert", out, err, w.inserted)
	}
}
