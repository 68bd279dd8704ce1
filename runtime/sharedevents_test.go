package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// Client events across runtimes sharing one PostgreSQL database, as
// several `rap serve` processes would.

// storedNumber returns the number N of a stored event's id "v2.sSTORE.N",
// or false for ids of events that are not stored (text deltas, markers,
// replayed state).
func storedNumber(id string) (int64, bool) {
	n, ok := storedPosition(id)
	return n, ok && strings.Count(id, ".") == 2
}

// storedPosition returns the stored event N an id of a shared store's
// event follows: its own number "v2.sSTORE.N", or the N of
// "v2.sSTORE.N.K".
func storedPosition(id string) (int64, bool) {
	e, reset := parseEventID(id)
	return int64(e.n), reset == "" && e.source[0] == sourceShared
}

// messageTexts returns the texts of the message events of evs, in order.
func messageTexts(t *testing.T, evs []idEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.typ != EventMessage {
			continue
		}
		var m struct{ Role, Text string }
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatalf("message event %q: %v", ev.data, err)
		}
		out = append(out, m.Role+":"+m.Text)
	}
	return out
}

// untilMessage reads s until a message event whose data contains text.
func (s *idStream) untilMessage(t *testing.T, text string) []idEvent {
	t.Helper()
	var out []idEvent
	for {
		ev := s.next(t)
		out = append(out, ev)
		if ev.typ == EventMessage && strings.Contains(ev.data, text) {
			return out
		}
	}
}

// A client streaming from runtime B sees every event of
// the slices runtime A runs, once and in order; it disconnects and resumes
// against A with the last id B gave it, and gets exactly the events it
// missed: the stored events it sees over both connections are numbered
// 1, 2, 3… without a gap or a duplicate, and every message once.
func TestSharedEventsAcrossRuntimes(t *testing.T) {
	u := pgtest.URL(t)
	model := scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}})
	a := newEnv(t, envOptions{pgURL: u, model: model})
	b := newEnv(t, envOptions{pgURL: u, model: model})
	th := a.newThread()
	ref := openIDStream(t, a.srv.URL, th, "", false) // connected throughout
	ref.until(t, EventReplayDone)

	s := openIDStream(t, b.srv.URL, th, "", false)
	first := s.until(t, EventReplayDone)
	got := live(t, first)
	a.post(th, "m1")
	got = append(got, s.untilMessage(t, `"ok"`)...)
	got = append(got, s.close()...)
	last := lastID(got, first[len(first)-1].id)

	// Missed while away: the rest of turn 1, and turn 2.
	a.post(th, "m2")
	a.waitHistory(th, "turn 2", func(h []store.Message) bool { return len(h) >= 4 })
	a.idle(th)
	// A stores its events after the turn, in the background: go on only
	// once turn 2's messages have their stored events, or m3's (stored by
	// whichever runtime runs it) may be numbered before them (seen once in
	// CI under -race: m1, m3, m2).
	poll(t, "turn 2's message events stored", func() bool {
		var evs []store.ThreadEvent
		a.pg.View(context.Background(), func(tx store.Tx) (err error) { evs, err = tx.ThreadEventsAfter(th, 0, 1000); return err })
		msgs := 0
		for _, ev := range evs {
			if ev.Type == EventMessage {
				msgs++
			}
		}
		return msgs >= 4
	})

	r := openIDStream(t, a.srv.URL, th, last, false)
	resumed := r.until(t, EventReplayDone)
	if !strings.Contains(resumed[len(resumed)-1].data, `"mode":"resume"`) {
		t.Fatalf("resume against A with B's id %s: %+v, want a resume", last, resumed)
	}
	got = append(got, resumed[:len(resumed)-1]...)
	b.post(th, "m3") // whichever runtime runs it
	for {
		ev := r.next(t)
		got = append(got, ev)
		if ev.typ == EventStatus && strings.Contains(ev.data, "idle") && len(messageTexts(t, got)) >= 6 {
			break
		}
	}

	var prev int64
	var stored []idEvent
	for _, ev := range got {
		n, ok := storedNumber(ev.id)
		if !ok {
			continue
		}
		if prev != 0 && n != prev+1 {
			t.Fatalf("stored event ids go from %d to %d (a gap or a duplicate): %+v", prev, n, got)
		}
		prev = n
		stored = append(stored, ev)
	}
	// The client connected to A throughout saw the same stored events.
	var fromA []idEvent
	for len(fromA) == 0 || fromA[len(fromA)-1].id != stored[len(stored)-1].id {
		ev := ref.next(t)
		if _, ok := storedNumber(ev.id); ok && (len(fromA) > 0 || ev.id == stored[0].id) {
			fromA = append(fromA, ev)
		}
	}
	if len(fromA) != len(stored) {
		t.Fatalf("the client of B, then A, saw %d stored events; the client of A %d:\n%+v\n%+v", len(stored), len(fromA), stored, fromA)
	}
	for i := range fromA {
		if stored[i] != fromA[i] {
			t.Fatalf("stored event %d: the moving client saw %+v, the client of A %+v", i, stored[i], fromA[i])
		}
	}
	want := []string{"user:m1", "assistant:ok", "user:m2", "assistant:ok", "user:m3", "assistant:ok"}
	if m := messageTexts(t, got); strings.Join(m, "|") != strings.Join(want, "|") {
		t.Fatalf("the client saw the messages %q over two runtimes, want %q", m, want)
	}
	t.Logf("completions: A %d, B %d", len(a.model.requests()), len(b.model.requests()))
}

// An oauth link reaches clients of every runtime, live
// and when they connect later, whichever runtime received it; it is kept
// in the store only until the call's result arrives.
func TestSharedOAuthLinkReachesEveryRuntime(t *testing.T) {
	const secretURL = "https://auth.example.com/authorize?state=XYZ-SHARED-STATE"
	granted := make(chan struct{})
	srv := rap.NewServer("accounts", &rap.ServerOptions{Logger: discardLogger()})
	rap.AddTool(srv, &rap.Tool{Name: "login", Description: "logs in"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		if err := c.RequestOAuth(ctx, secretURL); err != nil {
			return nil, err
		}
		select {
		case <-granted:
			return rap.Text("logged in as ada"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	url := sdkServer(t, srv)
	u := pgtest.URL(t)
	model := scripted.New([]scripted.Turn{
		{AfterUser: "log me in", ToolCalls: []scripted.Call{call("login", `{}`)}},
		{When: &scripted.When{UserContains: "asked the user to authorize", LastInput: "user"}, Text: "please open the link I showed you"},
		{When: &scripted.When{UserContains: "logged in as ada"}, Text: "you are in"},
	})
	a := newEnv(t, envOptions{pgURL: u, servers: []string{url}, model: model})
	b := newEnv(t, envOptions{pgURL: u, servers: []string{url}, model: model})
	th := a.newThread()
	liveA := sseClient(t, a.srv.URL, th)
	liveB := sseClient(t, b.srv.URL, th)
	a.post(th, "log me in")
	for name, l := range map[string]<-chan sseEvent{"A": liveA, "B": liveB} {
		if ev := nextSSE(t, l, EventOAuth); !strings.Contains(ev.data, "XYZ-SHARED-STATE") {
			t.Fatalf("the oauth event on a live client of %s = %s", name, ev.data)
		}
	}
	links := func() []store.OAuthLink {
		var out []store.OAuthLink
		err := a.pg.View(context.Background(), func(tx store.Tx) error {
			var err error
			out, err = tx.ThreadOAuthLinks(th, time.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if l := links(); len(l) != 1 {
		t.Fatalf("oauth links in the store while the call waits: %+v, want 1", l)
	}
	for name, e := range map[string]*env{"A": a, "B": b} {
		late := sseClient(t, e.srv.URL, th)
		if ev := nextSSE(t, late, EventOAuth); !strings.Contains(ev.data, "XYZ-SHARED-STATE") {
			t.Fatalf("a client connecting later to %s did not get the pending link: %s", name, ev.data)
		}
	}
	// The script answers the note of the oauth request, then the result:
	// grant only once the note was answered, or a turn that starts late
	// sees the note and the result together and answers only the note
	// (seen under -race on a loaded machine).
	a.waitHistory(th, "the answer to the oauth note", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "please open the link I showed you")
	})
	close(granted)
	a.waitHistory(th, "the result", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "you are in") })
	poll(t, "the oauth link deleted once the result arrived", func() bool { return len(links()) == 0 })
	for name, e := range map[string]*env{"A": a, "B": b} {
		prime, err := e.rt.primeEvents(context.Background(), th)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range prime {
			if p.Type == EventOAuth {
				t.Fatalf("%s still shows the link after the result arrived", name)
			}
		}
	}
	if strings.Contains(a.logs.String()+b.logs.String(), "XYZ-SHARED-STATE") {
		t.Fatal("the auth URL reached the logs")
	}
}

// A Last-Event-ID whose next events were pruned from the
// store, or that is not a stored event's id, gets a reset and a full
// replay, never a silent gap.
func TestSharedEventsResetAfterPrune(t *testing.T) {
	u := pgtest.URL(t)
	e := newEnv(t, envOptions{pgURL: u, model: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}})})
	th := e.newThread()
	s := openIDStream(t, e.srv.URL, th, "", false)
	s.until(t, EventReplayDone)
	e.post(th, "m1")
	got := s.untilMessage(t, `"ok"`)
	got = append(got, s.close()...)
	last := lastID(got, "")
	n, ok := storedNumber(last)
	if !ok {
		t.Fatalf("the last event id %q is not a stored event's", last)
	}
	e.post(th, "m2")
	e.waitHistory(th, "turn 2", func(h []store.Message) bool { return len(h) >= 4 })
	e.idle(th)
	// The writer stores events after the turn, in the background: prune
	// only once event n+1 has a successor to keep, or nothing after n is
	// pruned and the client resumes (seen under -race on a loaded machine).
	poll(t, "turn 2's events stored", func() bool {
		var head int64
		e.pg.View(context.Background(), func(tx store.Tx) error {
			var err error
			head, err = tx.LastThreadEventID(th)
			return err
		})
		return head >= n+2
	})
	if err := e.pg.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.PruneThreadEvents(time.Now().Add(-time.Hour), 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{last, "0123456789ab-3", "db-999999"} {
		r := openIDStream(t, e.srv.URL, th, id, false)
		replay := r.until(t, EventReplayDone)
		if replay[0].typ != EventReset || !strings.Contains(replay[len(replay)-1].data, `"mode":"reset"`) {
			t.Fatalf("Last-Event-ID %s: %+v, want a reset and a full replay", id, replay)
		}
		if m := messageTexts(t, replay); len(m) != 4 {
			t.Fatalf("the full replay after a reset has messages %q, want 4", m)
		}
		r.close()
	}
}

// A subscriber takes stored event N only after N-1, so
// events reaching it out of order or twice are queued once, in order; one
// whose next event a read proves pruned is dropped (it reconnects and is
// reset), never left with a gap; one behind the read is left for the next.
func TestSharedDeliverOrderAndGaps(t *testing.T) {
	h, se := newSharedHub(StreamLimits{})
	sub := func(cursor int64) *subscriber {
		s := newSubscriber(h.limits.BufferBytes, &h.queued)
		s.cursor = cursor
		if h.subs["t"] == nil {
			h.subs["t"] = map[*subscriber]struct{}{}
		}
		h.subs["t"][s] = struct{}{}
		return s
	}
	evs := func(ids ...int64) []store.ThreadEvent {
		var out []store.ThreadEvent
		for _, id := range ids {
			out = append(out, store.ThreadEvent{ThreadID: "t", ID: id, Type: EventStatus, Data: json.RawMessage(`{}`)})
		}
		return out
	}
	queuedIDs := func(s *subscriber) string {
		got, _ := s.take()
		var ids []string
		for _, e := range got {
			ids = append(ids, e.ID)
		}
		return strings.Join(ids, " ")
	}
	inOrder := sub(2)
	se.deliver(evs(4))       // ahead: left for the tailer
	se.deliver(evs(3))       // next
	se.deliver(evs(3, 4, 5)) // a duplicate, then the rest
	if got, want := queuedIDs(inOrder), se.storedID(3)+" "+se.storedID(4)+" "+se.storedID(5); got != want {
		t.Errorf("a subscriber at 2 given 4, 3, then 3 4 5 queued %q, want %q", got, want)
	}
	if !se.stale["t"] {
		t.Error("an event ahead of a subscriber did not mark its thread stale")
	}
	clear(se.stale)

	pruned := sub(5)
	behind := sub(1)
	se.deliverRead("t", 5, 9, evs(8, 9)) // 6 and 7 were pruned
	if !pruned.isClosed() || !inOrder.isClosed() {
		t.Errorf("after a read from 5 found 8, the subscribers at 5 closed = %v and %v; want both dropped", pruned.isClosed(), inOrder.isClosed())
	}
	if behind.isClosed() || !se.stale["t"] {
		t.Errorf("a subscriber behind the read was closed (%v) or its thread not marked stale (%v); want it left for the next read", behind.isClosed(), se.stale["t"])
	}
	allGone := sub(3)
	se.deliverRead("t", 3, 9, nil)
	if !allGone.isClosed() {
		t.Error("a subscriber whose every later event was pruned was not dropped")
	}
}

// noListen is a shared store that cannot LISTEN: its runtime relies on the
// poll.
type noListen struct{ store.Store }

func (noListen) SharedByProcesses() bool { return true }

func (n noListen) StoreID() string { return n.Store.(store.Shared).StoreID() }

// Without notifications (a lost listening connection),
// the poll still brings a client of B the events of A's slices.
func TestSharedEventsPollWithoutNotify(t *testing.T) {
	u := pgtest.URL(t)
	model := scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}})
	a := newEnv(t, envOptions{pgURL: u, model: model})
	b := newEnv(t, envOptions{pgURL: u, model: model, wrapStore: func(s store.Store) store.Store { return noListen{s} }})
	if _, shared := b.rt.coord.(*sharedCoord); !shared {
		t.Fatal("the wrapped store should be shared")
	}
	if _, ok := b.rt.store.(store.EventListener); ok {
		t.Fatal("the wrapped store should be unable to listen")
	}
	th := a.newThread()
	s := openIDStream(t, b.srv.URL, th, "", false)
	s.until(t, EventReplayDone)
	a.post(th, "m1")
	if m := messageTexts(t, s.untilMessage(t, `"ok"`)); strings.Join(m, "|") != "user:m1|assistant:ok" {
		t.Fatalf("a client of the runtime without notifications saw messages %q", m)
	}
}

// On SQLite (one process) events stay in memory:
// nothing is written to the store's event table.
func TestSQLiteEventsStayInMemory(t *testing.T) {
	e := newEnv(t, envOptions{turns: replyTurns("hello")})
	th := e.newThread()
	s := openIDStream(t, e.srv.URL, th, "", false)
	s.until(t, EventReplayDone)
	e.post(th, "hi")
	if id, reset := parseEventID(lastID(s.untilMessage(t, "hello"), "")); reset != "" || id.source[0] != sourceLocal {
		t.Fatalf("SQLite event id %+v (%s) is not a local one", id, reset)
	}
	if _, local := e.rt.coord.(*localCoord); !local {
		t.Fatal("a runtime on SQLite took the shared path")
	}
	if err := e.rt.store.View(context.Background(), func(tx store.Tx) error {
		last, err := tx.LastThreadEventID(th)
		if err == nil && last != 0 {
			t.Errorf("SQLite store holds %d events of the thread, want none", last)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
