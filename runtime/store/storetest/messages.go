package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// seqs returns "thread:seq" for each message.
func seqs(msgs []store.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprintf("%s:%d", m.ThreadID, m.Seq)
	}
	return out
}

func appendText(t *testing.T, s store.Store, thread string, texts ...string) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		msgs := make([]store.Message, len(texts))
		for i, text := range texts {
			msgs[i] = store.Message{Role: store.RoleUser, Text: text, Created: at(time.Minute)}
		}
		_, err := tx.AppendMessages(thread, msgs)
		return err
	})
}

// testMessages: AppendMessages assigns contiguous Seqs from 1 (and Created
// when zero) and returns the messages as stored; History, HistorySince and
// LastSeq read them back whole, per thread.
func testMessages(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	turn := []store.Message{
		{Role: store.RoleUser, Text: "hello", Created: at(time.Second)},
		{Role: store.RoleAssistant, Text: "calling", Created: at(2 * time.Second), ToolCalls: []store.ToolCall{
			{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"go"}`), Display: "search go"},
			{ID: "c2", Name: "fetch", Arguments: json.RawMessage(`{}`)},
		}},
		{Role: store.RoleTool, Created: at(3 * time.Second), ToolResults: []store.ToolResult{
			{CallID: "c1", Name: "search", Text: "found", DisplayAs: []rap.DisplaySegment{rap.TextSegment("found it")}, Subscription: true},
			{CallID: "c2", Name: "fetch", IsError: true, Text: "Error: gone", Content: []rap.ContentItem{{Type: "text", Text: "gone"}, {Type: "image", Data: "aGk=", MediaType: "image/png"}}},
		}},
	}
	var stored []store.Message
	view(t, s, func(tx store.Tx) error {
		n, err := tx.LastSeq("a")
		if err != nil {
			return err
		}
		if n != 0 {
			t.Errorf("LastSeq of an empty history = %d, want 0", n)
		}
		h, err := tx.History("a")
		if err != nil {
			return err
		}
		if len(h) != 0 {
			t.Errorf("History of a new thread = %v, want empty", seqs(h))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		var err error
		stored, err = tx.AppendMessages("a", turn)
		return err
	})
	if len(stored) != len(turn) {
		t.Fatalf("AppendMessages returned %d messages for %d", len(stored), len(turn))
	}
	for i, m := range stored {
		if m.ThreadID != "a" || m.Seq != int64(i+1) || !m.Created.Equal(turn[i].Created) {
			t.Errorf("stored message %d: thread %q seq %d created %v; want a, %d, %v", i, m.ThreadID, m.Seq, m.Created, i+1, turn[i].Created)
		}
	}
	// Created is stamped when zero; Seqs continue; another thread's start at 1.
	var later []store.Message
	before := time.Now().Add(-time.Minute)
	update(t, s, func(tx store.Tx) error {
		var err error
		if later, err = tx.AppendMessages("a", []store.Message{{Role: store.RoleUser, Text: "more"}}); err != nil {
			return err
		}
		_, err = tx.AppendMessages("b", []store.Message{{Role: store.RoleUser, Text: "b1", Created: at(0)}, {Role: store.RoleUser, Text: "b2", Created: at(0)}})
		return err
	})
	if len(later) != 1 || later[0].Seq != 4 || later[0].Created.Before(before) || later[0].Created.After(time.Now().Add(time.Minute)) {
		t.Errorf("a message appended with zero Created came back as %+v; want seq 4 and Created stamped now", later)
	}
	view(t, s, func(tx store.Tx) error {
		h, err := tx.History("a")
		if err != nil {
			return err
		}
		if len(h) != 4 {
			t.Fatalf("History(a) = %v, want 4 messages", seqs(h))
		}
		for i := range turn {
			want := turn[i]
			want.ThreadID, want.Seq = "a", int64(i+1)
			if !messageEqual(h[i], want) {
				t.Errorf("History(a)[%d] =\n%+v\nwant\n%+v", i, h[i], want)
			}
		}
		if !messageEqual(h[3], later[0]) {
			t.Errorf("History(a)[3] = %+v, want %+v", h[3], later[0])
		}
		since, err := tx.HistorySince("a", 2)
		if err != nil {
			return err
		}
		if got := fmt.Sprint(seqs(since)); got != "[a:3 a:4]" {
			t.Errorf("HistorySince(a, 2) = %s, want [a:3 a:4]", got)
		}
		if since, err = tx.HistorySince("a", 4); err != nil || len(since) != 0 {
			t.Errorf("HistorySince(a, 4) = %v, %v; want nothing", seqs(since), err)
		}
		for thread, want := range map[string]int64{"a": 4, "b": 2} {
			if n, err := tx.LastSeq(thread); err != nil || n != want {
				t.Errorf("LastSeq(%s) = %d, %v; want %d", thread, n, err, want)
			}
		}
		hb, err := tx.History("b")
		if err != nil {
			return err
		}
		if got := fmt.Sprint(seqs(hb)); got != "[b:1 b:2]" || hb[0].Text != "b1" || hb[1].Text != "b2" {
			t.Errorf("History(b) = %s %+v, want b's two messages only", got, hb)
		}
		return nil
	})
}

// messageEqual compares messages field by field, JSON arguments as values.
func messageEqual(a, b store.Message) bool {
	if a.ThreadID != b.ThreadID || a.Seq != b.Seq || a.Role != b.Role || a.Text != b.Text || !a.Created.Equal(b.Created) ||
		len(a.ToolCalls) != len(b.ToolCalls) || !reflect.DeepEqual(normResults(a.ToolResults), normResults(b.ToolResults)) {
		return false
	}
	for i := range a.ToolCalls {
		x, y := a.ToolCalls[i], b.ToolCalls[i]
		if x.ID != y.ID || x.Name != y.Name || x.Display != y.Display || !jsonEqual(x.Arguments, y.Arguments) {
			return false
		}
	}
	return true
}

// normResults makes empty slices nil and display contents compact, so
// that results compare by value.
func normResults(rs []store.ToolResult) []store.ToolResult {
	if len(rs) == 0 {
		return nil
	}
	out := make([]store.ToolResult, len(rs))
	for i, r := range rs {
		if len(r.Content) == 0 {
			r.Content = nil
		}
		if len(r.DisplayAs) == 0 {
			r.DisplayAs = nil
		}
		segs := make([]rap.DisplaySegment, len(r.DisplayAs))
		for j, d := range r.DisplayAs {
			var v any
			json.Unmarshal(d.Content, &v)
			c, _ := json.Marshal(v)
			segs[j] = rap.DisplaySegment{Type: d.Type, Content: c}
		}
		if len(segs) > 0 {
			r.DisplayAs = segs
		}
		out[i] = r
	}
	return out
}

// testInheritedHistory: a child with InheritSeq sees its parent's
// messages up to that Seq (with the parent's ThreadID), then its own, whose
// Seqs continue from it; the parent's later messages stay out; inheritance
// nests; HistorySince and LastSeq count the inherited part.
func testInheritedHistory(t *testing.T, s store.Store) {
	createThreads(t, s, "parent")
	appendText(t, s, "parent", "p1", "p2", "p3")
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "child", ParentID: "parent", InheritSeq: 2, Status: store.ThreadActive, Created: at(time.Second)}); err != nil {
			return err
		}
		return tx.CreateThread(store.Thread{ID: "fresh", ParentID: "parent", Status: store.ThreadActive, Created: at(time.Second)})
	})
	view(t, s, func(tx store.Tx) error {
		th, err := tx.Thread("child")
		if err != nil {
			return err
		}
		if th.InheritSeq != 2 {
			t.Errorf("child InheritSeq read back as %d, want 2", th.InheritSeq)
		}
		if n, err := tx.LastSeq("child"); err != nil || n != 2 {
			t.Errorf("LastSeq of a child with only inherited messages = %d, %v; want 2", n, err)
		}
		since, err := tx.HistorySince("child", 1)
		if err != nil {
			return err
		}
		if got := fmt.Sprint(seqs(since)); got != "[parent:2]" || since[0].Text != "p2" {
			t.Errorf("HistorySince(child, 1) of a child with only inherited messages = %s, want [parent:2]", got)
		}
		h, err := tx.History("fresh")
		if err != nil || len(h) != 0 {
			t.Errorf("History of a child with InheritSeq 0 = %v, %v; want empty", seqs(h), err)
		}
		return nil
	})
	appendText(t, s, "child", "c3", "c4")
	appendText(t, s, "parent", "p4")
	update(t, s, func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "grand", ParentID: "child", InheritSeq: 3, Status: store.ThreadActive, Created: at(2 * time.Second)})
	})
	appendText(t, s, "grand", "g4")
	view(t, s, func(tx store.Tx) error {
		for _, c := range []struct {
			thread string
			after  int64
			want   string
			texts  string
		}{
			{"child", 0, "[parent:1 parent:2 child:3 child:4]", "[p1 p2 c3 c4]"},
			{"child", 1, "[parent:2 child:3 child:4]", "[p2 c3 c4]"},
			{"child", 2, "[child:3 child:4]", "[c3 c4]"},
			{"child", 3, "[child:4]", "[c4]"},
			{"grand", 0, "[parent:1 parent:2 child:3 grand:4]", "[p1 p2 c3 g4]"},
			{"grand", 1, "[parent:2 child:3 grand:4]", "[p2 c3 g4]"},
			{"parent", 0, "[parent:1 parent:2 parent:3 parent:4]", "[p1 p2 p3 p4]"},
		} {
			var h []store.Message
			var err error
			what := fmt.Sprintf("HistorySince(%s, %d)", c.thread, c.after)
			if c.after == 0 {
				what = fmt.Sprintf("History(%s)", c.thread)
				h, err = tx.History(c.thread)
			} else {
				h, err = tx.HistorySince(c.thread, c.after)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			texts := make([]string, len(h))
			for i, m := range h {
				texts[i] = m.Text
			}
			if got := fmt.Sprint(seqs(h)); got != c.want || fmt.Sprint(texts) != c.texts {
				t.Errorf("%s = %s %v, want %s %s", what, got, texts, c.want, c.texts)
			}
		}
		for thread, want := range map[string]int64{"parent": 4, "child": 4, "grand": 4, "fresh": 0} {
			if n, err := tx.LastSeq(thread); err != nil || n != want {
				t.Errorf("LastSeq(%s) = %d, %v; want %d", thread, n, err, want)
			}
		}
		return nil
	})
}
