package postgres_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// TestDeltaPayloadsSplitMultibyte: a text longer than
// one NOTIFY payload is split by bytes on UTF-8 boundaries, every payload
// within the limit, the pieces' offsets consecutive and their texts
// together the original.
func TestDeltaPayloadsSplitMultibyte(t *testing.T) {
	text := strings.Repeat("añ€😀", 3000) // 1+2+3+4 bytes per rune group
	d := store.TextDelta{ThreadID: "th_1", After: 41, Turn: "t1", Offset: 7, Text: text}
	for _, max := range []int{postgres.MaxNotifyPayload, 100, 37} {
		ps := postgres.DeltaPayloads("snd", d, max)
		if len(ps) < 2 {
			t.Fatalf("max %d: %d payloads, want a split", max, len(ps))
		}
		var got strings.Builder
		off := d.Offset
		for _, p := range ps {
			if len(p) > max {
				t.Fatalf("max %d: payload of %d bytes", max, len(p))
			}
			header, piece, ok := strings.Cut(p, "\n")
			if !ok || !utf8.ValidString(piece) || piece == "" {
				t.Fatalf("max %d: bad piece %q", max, p)
			}
			f := strings.Fields(header)
			if want := []string{"snd", "41", strconv.Itoa(off), "t1", "th_1"}; strings.Join(f, " ") != strings.Join(want, " ") {
				t.Fatalf("max %d: header %q, want %q", max, header, want)
			}
			off += len(piece)
			got.WriteString(piece)
		}
		if got.String() != text {
			t.Fatalf("max %d: pieces do not make the text", max)
		}
	}
	if ps := postgres.DeltaPayloads("snd", store.TextDelta{ThreadID: "th_1", Turn: "t", Text: "ab"}, 50); len(ps) != 1 || !strings.HasSuffix(ps[0], "\nab") {
		t.Fatalf("short text: %q", ps)
	}
}

// TestTextDeltasNotifyListen: deltas sent through one
// Store reach the listeners of the other Stores on the schema in order,
// a long multibyte text split and whole; a Store does not hear its own;
// another schema hears nothing.
func TestTextDeltasNotifyListen(t *testing.T) {
	u := pgtest.URL(t)
	a, b := open(t, u), open(t, u)
	other := open(t, pgtest.URL(t))
	listenDeltas := func(s *postgres.Store) <-chan store.TextDelta {
		ctx, cancel := context.WithCancel(context.Background())
		got, ready, done := make(chan store.TextDelta, 64), make(chan struct{}), make(chan error, 1)
		go func() { done <- s.ListenTextDeltas(ctx, func() { close(ready) }, func(d store.TextDelta) { got <- d }) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("ListenTextDeltas: %v", err)
			}
		})
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("ListenTextDeltas ended before listening: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("ListenTextDeltas did not listen within 30s")
		}
		return got
	}
	fromA, fromB, fromOther := listenDeltas(a), listenDeltas(b), listenDeltas(other)
	long := strings.Repeat("é😀", 2000) // 12000 bytes: two payloads at least
	sent := []store.TextDelta{
		{ThreadID: "th_x", After: 3, Turn: "t1", Offset: 0, Text: "Hello "},
		{ThreadID: "th_x", After: 3, Turn: "t1", Offset: 6, Text: long},
		{ThreadID: "th_x", After: 3, Turn: "t1", Offset: 6 + len(long), Text: ""}, // empty: not sent
		{ThreadID: "th_x", After: 3, Turn: "t1", Offset: 6 + len(long), Text: "end"},
	}
	if err := a.SendTextDeltas(context.Background(), sent); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	off := 0
	deadline := time.After(30 * time.Second)
	for text.String() != "Hello "+long+"end" {
		select {
		case d := <-fromB:
			if d.ThreadID != "th_x" || d.After != 3 || d.Turn != "t1" || d.Offset != off {
				t.Fatalf("delta %+v at offset %d", d, off)
			}
			off += len(d.Text)
			text.WriteString(d.Text)
		case <-deadline:
			t.Fatalf("B got %q of the text within 30s", text.String())
		}
	}
	// A marker sent after: once B has it, A and the other schema would
	// have had theirs.
	if err := b.SendTextDeltas(context.Background(), []store.TextDelta{{ThreadID: "th_y", Turn: "t2", Text: "m"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-fromA:
		if d.ThreadID != "th_y" {
			t.Fatalf("A heard its own delta %+v", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("A did not hear B's delta within 30s")
	}
	select {
	case d := <-fromB:
		t.Fatalf("B heard more: %+v", d)
	case d := <-fromOther:
		t.Fatalf("another schema heard %+v", d)
	default:
	}
}
