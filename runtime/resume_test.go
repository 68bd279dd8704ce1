package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
)

// Tests of event ids, Last-Event-ID resume, the replay and its marker,
// over real HTTP.

// idEvent is one SSE event with its id line.
type idEvent struct{ id, typ, data string }

// idStream is one connection to a thread's event stream.
type idStream struct {
	events <-chan idEvent
	cancel context.CancelFunc
}

// openIDStream connects to the thread's events; lastID, when set, is sent
// as the Last-Event-ID header, or as the last_event_id query parameter
// when asQuery.
func openIDStream(t *testing.T, base, thread, lastID string, asQuery bool) *idStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u := base + "/v1/threads/" + thread + "/events"
	if lastID != "" && asQuery {
		u += "?" + LastEventIDParam + "=" + url.QueryEscape(lastID)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if lastID != "" && !asQuery {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	events := make(chan idEvent, 10000)
	go func() {
		defer resp.Body.Close()
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev idEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.typ != "":
				events <- ev
				ev = idEvent{}
			}
		}
	}()
	return &idStream{events: events, cancel: cancel}
}

// next returns the stream's next event.
func (s *idStream) next(t *testing.T) idEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// until returns the events up to and including the first of type typ.
func (s *idStream) until(t *testing.T, typ string) []idEvent {
	t.Helper()
	var out []idEvent
	for {
		ev := s.next(t)
		out = append(out, ev)
		if ev.typ == typ {
			return out
		}
	}
}

// close disconnects and returns the events received before the
// disconnection that were not read yet.
func (s *idStream) close() []idEvent {
	s.cancel()
	var out []idEvent
	for ev := range s.events {
		out = append(out, ev)
	}
	return out
}

// gatedModel streams its reply one piece per token sent on step, so that a
// test decides when each text delta happens.
type gatedModel struct {
	pieces []string
	step   chan struct{}
}

func (g *gatedModel) Name() string         { return "gated (test)" }
func (g *gatedModel) SupportsImages() bool { return false }

func (g *gatedModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	for _, p := range g.pieces {
		select {
		case <-g.step:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.TextDelta(p)
	}
	return &model.Response{Text: strings.Join(g.pieces, ""), StopReason: "end_turn"}, nil
}

func newGated(n int) *gatedModel {
	g := &gatedModel{step: make(chan struct{})}
	for i := range n {
		g.pieces = append(g.pieces, fmt.Sprintf("w%d ", i))
	}
	return g
}

// deltaText is the text of a text_delta event.
func deltaText(t *testing.T, ev idEvent) string {
	t.Helper()
	var d struct{ Text string }
	if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
		t.Fatalf("text_delta %q: %v", ev.data, err)
	}
	return d.Text
}

// waitDelta reads s until a text_delta whose text is want.
func waitDelta(t *testing.T, s *idStream, want string) []idEvent {
	t.Helper()
	var out []idEvent
	for {
		ev := s.next(t)
		out = append(out, ev)
		if ev.typ == EventTextDelta && deltaText(t, ev) == want {
			return out
		}
	}
}

// lastID returns the id of the last event that has one.
func lastID(evs []idEvent, before string) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].id != "" {
			return evs[i].id
		}
	}
	return before
}

// live returns the events after the replay_done marker of evs.
func live(t *testing.T, evs []idEvent) []idEvent {
	t.Helper()
	for i, ev := range evs {
		if ev.typ == EventReplayDone {
			return evs[i+1:]
		}
	}
	t.Fatalf("no replay_done marker in %v", evs)
	return nil
}

// A client that connects afresh gets the thread's state
// (the thread, its history as message events), then the replay_done
// marker, then live events, each with an id that increases.
func TestEventStreamReplayMarker(t *testing.T) {
	e := newEnv(t, envOptions{turns: replyTurns("hello there", "again")})
	th := e.newThread()
	e.post(th, "hi")
	e.idle(th)
	s := openIDStream(t, e.srv.URL, th, "", false)
	replay := s.until(t, EventReplayDone)
	if replay[0].typ != EventToolsets || replay[1].typ != EventThread || !strings.Contains(replay[1].data, `"id":"`+th+`"`) {
		t.Fatalf("replay starts with %+v, want the toolsets and the thread", replay[:2])
	}
	var msgs []string
	for _, ev := range replay {
		if ev.typ == EventReset {
			t.Fatalf("a first connect was flagged as a reset: %+v", ev)
		}
		if ev.typ == EventMessage {
			msgs = append(msgs, ev.data)
		}
	}
	if len(msgs) != 2 || !strings.Contains(msgs[0], `"text":"hi"`) || !strings.Contains(msgs[1], `"text":"hello there"`) {
		t.Fatalf("replayed messages = %q", msgs)
	}
	done := replay[len(replay)-1]
	for _, ev := range replay[:len(replay)-1] {
		if !strings.HasPrefix(ev.id, done.id+replayIDSep) {
			t.Fatalf("replayed event %+v: want an id of the replay %s", ev, done.id)
		}
	}
	if done.id == "" || !strings.Contains(done.data, `"mode":"replay"`) || !strings.Contains(done.data, `"last_seq":2`) {
		t.Fatalf("replay_done = %+v", done)
	}
	e.post(th, "more")
	evs := s.until(t, EventMessage) // the user's message
	evs = append(evs, s.until(t, EventMessage)...)
	prev := done.id
	for _, ev := range evs {
		if ev.id == "" {
			t.Fatalf("live event without an id: %+v", ev)
		}
		if !idLess(t, prev, ev.id) {
			t.Fatalf("id %s does not follow %s", ev.id, prev)
		}
		prev = ev.id
	}
	if !strings.Contains(evs[len(evs)-1].data, `"text":"again"`) || strings.Contains(evs[len(evs)-1].data, `"text":"hello there"`) {
		t.Fatalf("live messages = %+v", evs)
	}
}

// idLess reports whether id a comes before id b of the same process.
func idLess(t *testing.T, a, b string) bool {
	t.Helper()
	ia, reset1 := parseEventID(a)
	ib, reset2 := parseEventID(b)
	if reset1 != "" || reset2 != "" || ia.source != ib.source || ia.source[0] != sourceLocal || ia.k != 0 || ib.k != 0 {
		t.Fatalf("ids %q and %q are not of one process", a, b)
	}
	return ia.n < ib.n
}

// A client that disconnects and reconnects with its
// Last-Event-ID while events flow receives exactly what a client that never
// disconnected receives: no gap, no duplicate, in the same order.
func TestEventStreamResumeNoGapsOrDupes(t *testing.T) {
	g := newGated(30)
	e := newEnv(t, envOptions{model: g})
	th := e.newThread()
	ref := openIDStream(t, e.srv.URL, th, "", false)
	ref.until(t, EventReplayDone)
	a := openIDStream(t, e.srv.URL, th, "", true)
	var got []idEvent
	first := a.until(t, EventReplayDone)
	mark := first[len(first)-1].id
	got = append(got, live(t, first)...)
	var want []idEvent
	e.post(th, "go")
	asQuery := false
	for i := 0; i < len(g.pieces); i++ {
		g.step <- struct{}{}
		want = append(want, waitDelta(t, ref, g.pieces[i])...)
		if i%5 == 2 {
			// Disconnect a; the next pieces stream while it is away.
			got = append(got, a.close()...)
			last := lastID(got, mark)
			for j := 0; j < 2 && i+1 < len(g.pieces); j++ {
				i++
				g.step <- struct{}{}
				want = append(want, waitDelta(t, ref, g.pieces[i])...)
			}
			asQuery = !asQuery
			a = openIDStream(t, e.srv.URL, th, last, asQuery)
			resumed := a.until(t, EventReplayDone)
			for _, ev := range resumed {
				if ev.typ == EventReset || ev.typ == EventThread {
					t.Fatalf("resume from %s replayed the state: %+v", last, resumed)
				}
			}
			if !strings.Contains(resumed[len(resumed)-1].data, `"mode":"resume"`) {
				t.Fatalf("replay_done of a resume = %+v", resumed[len(resumed)-1])
			}
			got = append(got, resumed[:len(resumed)-1]...)
		}
	}
	// The turn is saved, the thread idle, then the turn's end is told.
	want = append(want, ref.until(t, EventTurnEnded)...)
	for len(got) < len(want) {
		got = append(got, a.next(t))
	}
	if len(got) != len(want) {
		t.Fatalf("resumed client got %d events, the connected one %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: resumed client got %+v, the connected one %+v", i, got[i], want[i])
		}
	}
	var text strings.Builder
	for _, ev := range got {
		if ev.typ == EventTextDelta {
			text.WriteString(deltaText(t, ev))
		}
	}
	if text.String() != strings.Join(g.pieces, "") {
		t.Fatalf("resumed text = %q", text.String())
	}
}

// A Last-Event-ID the runtime cannot resume (malformed,
// from before a restart, or older than what it keeps) gets a reset event
// first, then a full replay flagged as a reset.
func TestEventStreamResetAfterUnknownID(t *testing.T) {
	e := newEnv(t, envOptions{turns: replyTurns("one", "two", "three"), tweak: func(c *Config) {
		c.Streams.ResumeBytes = 1 // keep only the newest event
	}})
	th := e.newThread()
	s := openIDStream(t, e.srv.URL, th, "", false)
	replayID := s.until(t, EventReplayDone)[0].id
	e.post(th, "a")
	evs := s.until(t, EventMessage)
	oldID := evs[0].id
	s.until(t, EventMessage)
	e.idle(th)
	s.close()
	checkReset := func(lastID, reason string) {
		t.Helper()
		r := openIDStream(t, e.srv.URL, th, lastID, false)
		defer r.close()
		evs := r.until(t, EventReplayDone)
		if evs[0].typ != EventReset || !strings.Contains(evs[0].data, reason) {
			t.Fatalf("Last-Event-ID %q: first event %+v, want a reset saying %q", lastID, evs[0], reason)
		}
		if evs[2].typ != EventThread {
			t.Fatalf("after the reset: %+v, want the toolsets and the thread", evs[1:3])
		}
		var msgs int
		for _, ev := range evs {
			if ev.typ == EventMessage {
				msgs++
			}
		}
		if msgs != len(e.history(th)) {
			t.Fatalf("reset replayed %d messages, the history has %d", msgs, len(e.history(th)))
		}
		if done := evs[len(evs)-1]; !strings.Contains(done.data, `"mode":"reset"`) || done.id == "" {
			t.Fatalf("replay_done after a reset = %+v", done)
		}
	}
	checkReset("not-an-id", resetMalformed)
	checkReset("ffffffffffff-3", resetOldFormat)
	checkReset("v2.pffffffffffff.3", resetRestarted)
	checkReset("v2.sffffffffffff.3", resetFromShared)
	checkReset(oldID, resetTooOld) // the log keeps only the newest event
	checkReset(replayID, resetInReplay)
	e.stop()
	e.start()
	checkReset(oldID, resetRestarted)
}

// A client that resumes after a disconnect mid-reply ends
// with the reply's exact text once; so does a client that connects afresh
// mid-reply (the text so far is replayed as one text_delta) and one whose
// id could not be resumed.
func TestEventStreamMidReplyExactText(t *testing.T) {
	g := newGated(12)
	e := newEnv(t, envOptions{model: g})
	th := e.newThread()
	a := openIDStream(t, e.srv.URL, th, "", false)
	a.until(t, EventReplayDone)
	e.post(th, "go")
	var text strings.Builder
	var last string
	collect := func(evs []idEvent) {
		last = lastID(evs, last)
		for _, ev := range evs {
			if ev.typ == EventTextDelta {
				text.WriteString(deltaText(t, ev))
			}
		}
	}
	for _, p := range g.pieces[:4] {
		g.step <- struct{}{}
		collect(waitDelta(t, a, p))
	}
	collect(a.close())
	if last == "" {
		t.Fatal("no id seen")
	}
	for _, p := range g.pieces[4:8] {
		g.step <- struct{}{}
		_ = p
	}
	// A client connecting afresh mid-reply, and one with an id it cannot
	// resume: each gets the text so far once, then the rest live.
	var fresh, reset strings.Builder
	freshS := openIDStream(t, e.srv.URL, th, "", false)
	resetS := openIDStream(t, e.srv.URL, th, "ffffffffffff-1", false)
	resumed := openIDStream(t, e.srv.URL, th, last, false)
	for _, p := range g.pieces[8:] {
		g.step <- struct{}{}
		_ = p
	}
	full := strings.Join(g.pieces, "")
	for _, c := range []struct {
		s   *idStream
		out *strings.Builder
	}{{freshS, &fresh}, {resetS, &reset}, {resumed, &text}} {
		for {
			ev := c.s.next(t)
			if ev.typ == EventTextDelta {
				c.out.WriteString(deltaText(t, ev))
			}
			if ev.typ == EventMessage && strings.Contains(ev.data, `"role":"assistant"`) {
				break
			}
		}
	}
	if text.String() != full {
		t.Fatalf("resumed client's text = %q, want %q", text.String(), full)
	}
	if fresh.String() != full {
		t.Fatalf("client connected mid-reply: text = %q, want %q", fresh.String(), full)
	}
	if reset.String() != full {
		t.Fatalf("client reset mid-reply: text = %q, want %q", reset.String(), full)
	}
}

// replyTurns are scripted turns that answer with each text in turn.
func replyTurns(texts ...string) []scripted.Turn {
	var out []scripted.Turn
	for _, t := range texts {
		out = append(out, scripted.Turn{Text: t})
	}
	return out
}

// A stream attached while turns are being saved gets every message once,
// replayed or live, never twice and never none: the live events of a
// message the replay had are skipped.
func TestEventStreamReplayDuringTraffic(t *testing.T) {
	texts := []string{"x", "y", "z", "u", "v", "w"}
	e := newEnv(t, envOptions{turns: replyTurns(texts...)})
	th := e.newThread()
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for _, m := range texts {
			if e.rt.PostMessage(context.Background(), th, m) != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			e.rt.Idle(ctx, th)
			cancel()
		}
	}()
	var streams []*idStream
	for len(streams) < 20 {
		streams = append(streams, openIDStream(t, e.srv.URL, th, "", false))
		select {
		case <-posted:
		default:
			continue
		}
		break
	}
	<-posted
	want := int64(2 * len(texts))
	for i, s := range streams {
		seen := map[int64]int{}
		for seen[want] == 0 {
			ev := s.next(t)
			if ev.typ == EventMessage {
				var m struct{ Seq int64 }
				json.Unmarshal([]byte(ev.data), &m)
				seen[m.Seq]++
			}
		}
		for seq := int64(1); seq <= want; seq++ {
			if seen[seq] != 1 {
				t.Fatalf("stream %d: message %d seen %d times (%v)", i, seq, seen[seq], seen)
			}
		}
		s.close()
	}
}

// The resume logs are bounded per thread and in total;
// the least recently used logs of threads nobody streams go first, and
// their old ids are then answered with a reset.
func TestResumeLogsBounded(t *testing.T) {
	const per, total = 10 << 10, 100 << 10
	h, le := newLocalHub(StreamLimits{ResumeBytes: per, ResumeTotalBytes: total})
	var marks []string
	for i := range 50 {
		id := fmt.Sprint(i)
		_, cancel, att := h.attach(id, "")
		cancel()
		marks = append(marks, att.mark)
		for range 20 {
			h.publish(Event{Type: EventTextDelta, ThreadID: id, Data: make([]byte, 1000)})
		}
	}
	h.mu.Lock()
	sum := 0
	for id, l := range le.logs {
		if l.bytes > per {
			t.Errorf("log of %s holds %d bytes, over its bound %d", id, l.bytes, per)
		}
		sum += l.bytes
	}
	if sum != le.logBytes || sum > total {
		t.Errorf("logs hold %d bytes (counted %d), bound %d", sum, le.logBytes, total)
	}
	last := le.logs["49"]
	resumeFrom := last.events[len(last.events)-2].ID
	h.mu.Unlock()
	if _, cancel, att := h.attach("0", marks[0]); att.reset != resetTooOld {
		t.Errorf("resume of a forgotten log: reset %q, want %q", att.reset, resetTooOld)
	} else {
		cancel()
	}
	if _, cancel, att := h.attach("49", marks[49]); att.reset != resetTooOld {
		t.Errorf("resume from before the log's floor: reset %q, want %q", att.reset, resetTooOld)
	} else {
		cancel()
	}
	s, cancel, att := h.attach("49", resumeFrom)
	defer cancel()
	if !att.resumed {
		t.Fatalf("resume from a kept id: %+v", att)
	}
	evs, _ := s.take()
	if len(evs) != 2 || evs[0].Type != EventTextDelta || evs[1].Type != EventReplayDone {
		t.Fatalf("resumed with %d events: %+v", len(evs), evs)
	}
}
