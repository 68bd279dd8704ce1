package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// Text deltas across runtimes sharing one PostgreSQL database (sharedeltas.go).

// steppedModel streams its first completion piece by piece, each piece only
// when the test sends on step, and reports on started which model runs it;
// later completions answer "ok" at once.
type steppedModel struct {
	name    string
	pieces  []string
	calls   *atomic.Int32
	started chan string
	step    chan struct{}
}

func (g *steppedModel) Name() string         { return "gated" }
func (g *steppedModel) SupportsImages() bool { return false }
func (g *steppedModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if g.calls.Add(1) > 1 {
		s.TextDelta("ok")
		return &model.Response{Text: "ok"}, nil
	}
	g.started <- g.name
	for _, p := range g.pieces {
		select {
		case <-g.step:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.TextDelta(p)
	}
	select {
	case <-g.step:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &model.Response{Text: strings.Join(g.pieces, "")}, nil
}

// TestSharedTextDeltasAcrossRuntimes: a client of the
// runtime that does not run the model sees the model's text deltas live,
// in order, multibyte text whole, before the turn's message; a delta of
// that turn arriving after the message (a late notification) is not
// shown.
func TestSharedTextDeltasAcrossRuntimes(t *testing.T) {
	u := pgtest.URL(t)
	pieces := []string{"Hel", "lo wö", "rld 😀", " ✓"}
	var calls atomic.Int32
	started, step := make(chan string, 2), make(chan struct{})
	a := newEnv(t, envOptions{pgURL: u, model: &steppedModel{name: "a", pieces: pieces, calls: &calls, started: started, step: step}})
	b := newEnv(t, envOptions{pgURL: u, model: &steppedModel{name: "b", pieces: pieces, calls: &calls, started: started, step: step}})
	th := a.newThread()
	streams := map[string]*idStream{
		"a": openIDStream(t, a.srv.URL, th, "", false),
		"b": openIDStream(t, b.srv.URL, th, "", false),
	}
	for _, s := range streams {
		s.until(t, EventReplayDone)
	}
	a.post(th, "hi")
	var runner string
	select {
	case runner = <-started:
	case <-time.After(waitFor):
		t.Fatal("no completion started")
	}
	other, otherEnv := streams["b"], b
	if runner == "b" {
		other, otherEnv = streams["a"], a
	}
	// Each piece is released only once the other runtime's client saw the
	// previous one: every piece must reach it, in order.
	var turn, lastStored string
	for _, p := range pieces {
		step <- struct{}{}
		for {
			ev := other.next(t)
			if ev.typ == EventMessage && strings.Contains(ev.data, `"assistant"`) {
				t.Fatalf("the message came before the delta %q", p)
			}
			if _, ok := storedNumber(ev.id); ok {
				lastStored = ev.id
			}
			if ev.typ != EventTextDelta {
				continue
			}
			if got := deltaText(t, ev); got != p {
				t.Fatalf("text_delta %q, want %q", got, p)
			}
			n, ok := storedPosition(ev.id)
			if _, stored := storedNumber(ev.id); !ok || stored {
				t.Fatalf("text_delta id %q, want v2.sSTORE.N.K", ev.id)
			}
			if want, _ := storedPosition(lastStored); n != want {
				t.Fatalf("text_delta id %q after stored event %q", ev.id, lastStored)
			}
			break
		}
	}
	otherEnv.rt.hub.mu.Lock()
	for s := range otherEnv.rt.hub.subs[th] {
		turn = s.relay.turn
	}
	otherEnv.rt.hub.mu.Unlock()
	step <- struct{}{} // the completion ends
	full := strings.Join(pieces, "")
	evs := other.untilMessage(t, full)
	for _, ev := range evs {
		if ev.typ == EventTextDelta {
			t.Fatalf("text_delta %q after the last piece", ev.data)
		}
	}
	// A late notification of the turn, at the position before the
	// message, is dropped.
	before, _ := storedPosition(lastStored)
	otherEnv.rt.hub.ev.(*sharedEvents).relayIn(store.TextDelta{ThreadID: th, After: before, Turn: turn, Offset: len(full), Text: "LATE"})
	otherEnv.post(th, "again")
	for _, ev := range other.untilMessage(t, `"ok"`) {
		if ev.typ == EventTextDelta && strings.Contains(ev.data, "LATE") {
			t.Fatal("a delta of a turn was shown after its message")
		}
	}
}

// TestSharedTextDeltaGaps: a subscriber takes a turn's
// deltas at its stored position in offset order; a duplicate is dropped,
// a gap (a lost notification) stops the turn's deltas, a turn first seen
// past offset 0 shows none; deltas for a position the subscriber has not
// reached are held until it does and dropped once it passed it; a new
// turn shows again.
func TestSharedTextDeltaGaps(t *testing.T) {
	h, se := newSharedHub(StreamLimits{})
	s := newSubscriber(h.limits.BufferBytes, &h.queued)
	s.cursor = 5
	h.subs["t"] = map[*subscriber]struct{}{s: {}}
	texts := func() string {
		got, _ := s.take()
		var out []string
		for _, e := range got {
			if e.Type == EventTextDelta {
				var d struct{ Text string }
				json.Unmarshal(e.Data, &d)
				out = append(out, d.Text)
			} else {
				out = append(out, "<"+e.ID+">")
			}
		}
		return strings.Join(out, "|")
	}
	d := func(after int64, turn string, off int, text string) {
		se.relayIn(store.TextDelta{ThreadID: "t", After: after, Turn: turn, Offset: off, Text: text})
	}
	d(5, "t1", 0, "ab")
	d(5, "t1", 0, "ab") // duplicate
	d(5, "t1", 2, "cd")
	d(5, "t1", 6, "gh") // 4..6 lost: the turn stops
	d(5, "t1", 4, "ef") // too late
	d(5, "t1", 8, "ij")
	if got := texts(); got != "ab|cd" {
		t.Fatalf("turn with a gap showed %q, want ab|cd", got)
	}
	d(5, "t2", 3, "xyz") // joined mid-turn
	d(5, "t2", 6, "w")
	if got := texts(); got != "" {
		t.Fatalf("a turn first seen past offset 0 showed %q", got)
	}
	d(6, "t3", 0, "held")  // the subscriber is at 5: held
	d(4, "t3", 0, "stale") // behind it: dropped
	if got := texts(); got != "" {
		t.Fatalf("deltas for another position showed %q", got)
	}
	se.deliver([]store.ThreadEvent{{ThreadID: "t", ID: 6, Type: EventStatus, Data: json.RawMessage(`{}`)}})
	d(6, "t3", 4, "!")
	if got, want := texts(), "<"+se.storedID(6)+">|held|!"; got != want {
		t.Fatalf("after stored event 6: %q, want %q", got, want)
	}
	d(7, "t4", 0, "old") // held for 7
	se.deliver([]store.ThreadEvent{
		{ThreadID: "t", ID: 7, Type: EventMessage, Data: json.RawMessage(`{}`)},
		{ThreadID: "t", ID: 8, Type: EventMessage, Data: json.RawMessage(`{}`)},
	})
	d(7, "t4", 3, "late") // the subscriber passed 7: dropped
	if got, want := texts(), "<"+se.storedID(7)+">|old|<"+se.storedID(8)+">"; got != want {
		t.Fatalf("deltas around a message: %q, want %q", got, want)
	}
}

// TestSharedTextDeltaPosition: the sender gives a delta
// a stored position only while every event it published for the thread
// is stored; one streamed before waits, and is sent at that event's
// position once it is stored.
func TestSharedTextDeltaPosition(t *testing.T) {
	h, se := newSharedHub(StreamLimits{})
	se.relay.on = true
	tr := &relayTurn{id: "t1", head: 3}
	se.relay.turns["t"] = tr
	h.mu.Lock()
	se.relayDelta("t", "ab")
	se.relayDelta("t", "cd") // coalesced
	got := se.takeSendable("t", tr)
	h.mu.Unlock()
	if len(got) != 1 || got[0].After != 3 || got[0].Text != "abcd" || got[0].Offset != 0 {
		t.Fatalf("sendable %+v, want one abcd after 3", got)
	}
	h.publish(Event{Type: EventStatus, ThreadID: "t", Data: json.RawMessage(`{}`)}) // not yet stored
	h.mu.Lock()
	se.relayDelta("t", "e\x00\xff")
	got = se.takeSendable("t", tr)
	h.mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("sent %+v while an event was not stored", got)
	}
	evs := se.takePending()
	se.deliverWritten(evs, []store.ThreadEvent{{ThreadID: "t", ID: 4, Type: EventStatus, Data: json.RawMessage(`{}`)}})
	h.mu.Lock()
	got = se.takeSendable("t", tr)
	h.mu.Unlock()
	if len(got) != 1 || got[0].After != 4 || got[0].Offset != 4 || got[0].Text != "e\uFFFD\uFFFD" {
		t.Fatalf("sendable %+v, want e\\uFFFD\\uFFFD at offset 4 after 4", got)
	}
}

// lossyRelay is a PostgreSQL store whose send number drop (counted over
// every lossyRelay sharing sends) is lost in transit.
type lossyRelay struct {
	*postgres.Store
	sends *atomic.Int32
	drop  int32
}

func (l lossyRelay) SendTextDeltas(ctx context.Context, deltas []store.TextDelta) error {
	if l.sends.Add(1) == l.drop {
		return nil
	}
	return l.Store.SendTextDeltas(ctx, deltas)
}

// TestSharedTextDeltaLostInTransit: when a piece of a
// reply is lost between processes, the client of the other runtime is
// shown the pieces before it and none after it, then the message: never
// text with a hole in it.
func TestSharedTextDeltaLostInTransit(t *testing.T) {
	u := pgtest.URL(t)
	pieces := []string{"one ", "two ", "three"}
	var calls, sends atomic.Int32
	started, step := make(chan string, 2), make(chan struct{})
	wrap := func(st store.Store) store.Store {
		return lossyRelay{Store: st.(*postgres.Store), sends: &sends, drop: 2}
	}
	a := newEnv(t, envOptions{pgURL: u, wrapStore: wrap, model: &steppedModel{name: "a", pieces: pieces, calls: &calls, started: started, step: step}})
	b := newEnv(t, envOptions{pgURL: u, wrapStore: wrap, model: &steppedModel{name: "b", pieces: pieces, calls: &calls, started: started, step: step}})
	th := a.newThread()
	streams := map[string]*idStream{
		"a": openIDStream(t, a.srv.URL, th, "", false),
		"b": openIDStream(t, b.srv.URL, th, "", false),
	}
	for _, s := range streams {
		s.until(t, EventReplayDone)
	}
	a.post(th, "hi")
	var runner string
	select {
	case runner = <-started:
	case <-time.After(waitFor):
		t.Fatal("no completion started")
	}
	other := streams["b"]
	if runner == "b" {
		other = streams["a"]
	}
	step <- struct{}{} // "one " is sent (send 1) and shown
	waitDelta(t, other, "one ")
	step <- struct{}{} // "two " is sent (send 2) and lost
	deadline := time.Now().Add(waitFor)
	for sends.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second piece was not sent")
		}
		time.Sleep(5 * time.Millisecond)
	}
	step <- struct{}{} // "three" is sent (send 3) after the gap
	step <- struct{}{} // the completion ends
	for _, ev := range other.untilMessage(t, "one two three") {
		if ev.typ == EventTextDelta {
			t.Fatalf("text_delta %q shown after a lost piece", deltaText(t, ev))
		}
	}
	if n := sends.Load(); n != 3 {
		t.Fatalf("%d sends, want 3 (one per piece)", n)
	}
}
