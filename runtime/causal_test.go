package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// The raw event stream of a thread tells its story in causal order: the
// inputs a completion answers (a user message, a tool result, a
// subscription event injected inline, a child thread's report) are
// announced before the first text delta of that completion, each message
// once, with the Seq and content it is saved with. Checked on SQLite, on
// PostgreSQL, and across two processes sharing one database, with clients
// of both.
func TestInputsAnnouncedBeforeTheirAnswer(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { causalScenario(t, envOptions{}, false) })
	t.Run("postgres", func(t *testing.T) { causalScenario(t, envOptions{postgres: true}, false) })
	t.Run("two processes", func(t *testing.T) { causalScenario(t, envOptions{pgURL: pgtest.URL(t)}, true) })
}

func causalScenario(t *testing.T, o envOptions, twoProcesses bool) {
	src := newEventSource(t, "feed")
	o.servers = []string{src.url}
	o.model = &fnModel{fn: eventAgent(func(string) (string, any) {
		return "watch_feed", map[string]string{"topic": "news"}
	})}
	envs := []*env{newEnv(t, o)}
	if twoProcesses {
		envs = append(envs, newEnv(t, o))
	}
	e := envs[0]
	root := e.newThread()
	var streams []*idStream
	for _, x := range envs {
		s := openIDStream(t, x.srv.URL, root, "", false)
		s.until(t, EventReplayDone)
		streams = append(streams, s)
	}
	e.post(root, "subscribe to the news")
	poll(t, "an active subscription", func() bool {
		var subs []store.Subscription
		e.rt.store.View(context.Background(), func(tx store.Tx) error {
			var err error
			subs, err = tx.ThreadSubscriptions(root)
			return err
		})
		return len(subs) == 1 && subs[0].State == store.SubscriptionActive
	})
	src.push("news", sourceEvent{text: `{"headline":"RAW-ONE"}`}, sourceEvent{text: `{"progress":"INLINE-50%"}`, associative: true})
	e.waitHistory(root, "a report and an inline event answered", func(h []store.Message) bool {
		_, res := injected(h)
		return len(res) == 2 && h[len(h)-1].Role == store.RoleAssistant
	})
	for _, x := range envs {
		x.idle(root)
	}
	history := e.history(root)
	last := history[len(history)-1].Seq
	streamed := 0
	for i, s := range streams {
		var evs []idEvent
		for {
			ev := s.next(t)
			evs = append(evs, ev)
			if ev.typ == EventMessage && messageSeq(t, ev) == last {
				break
			}
		}
		n, err := checkCausal(evs, history)
		if err != nil {
			t.Fatalf("stream of client %d: %v\nevents:\n%s\nhistory:\n%s", i, err, eventList(evs), dump(history))
		}
		streamed += n
	}
	// The answers to the message, the confirmation, and the event and
	// report (perhaps in one completion); text deltas relayed from
	// another process may be left out of a stream, never reordered.
	if streamed < 3 {
		t.Fatalf("the clients saw %d turns stream text, want at least 3", streamed)
	}
}

func messageSeq(t *testing.T, ev idEvent) int64 {
	t.Helper()
	var m api.Message
	if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
		t.Fatalf("message event %s: %v", ev.data, err)
	}
	return m.Seq
}

// checkCausal checks evs, the live events of a thread, against its saved
// history: every message is announced once, as saved; the inputs of each
// assistant turn whose text streamed come before its first text delta. It
// returns how many turns streamed text.
func checkCausal(evs []idEvent, history []store.Message) (int, error) {
	saved := map[int64]store.Message{}
	for _, m := range history {
		saved[m.Seq] = m
	}
	seen := map[int64]bool{}
	atDelta := map[int64]map[int64]bool{} // by turn: what was announced at its first delta
	var snap map[int64]bool
	for _, ev := range evs {
		switch ev.typ {
		case EventTextDelta:
			if snap == nil {
				snap = map[int64]bool{}
				for k := range seen {
					snap[k] = true
				}
			}
		case EventMessage:
			var m api.Message
			if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
				return 0, err
			}
			if seen[m.Seq] {
				return 0, fmt.Errorf("message %d announced twice", m.Seq)
			}
			seen[m.Seq] = true
			want, ok := saved[m.Seq]
			if !ok {
				return 0, fmt.Errorf("message %d announced but not saved", m.Seq)
			}
			if string(want.Role) != string(m.Role) || want.Text != m.Text || len(want.ToolResults) != len(m.ToolResults) || len(want.ToolCalls) != len(m.ToolCalls) {
				return 0, fmt.Errorf("message %d announced as %s %q (%d results) but saved as %s %q (%d results)",
					m.Seq, m.Role, m.Text, len(m.ToolResults), want.Role, want.Text, len(want.ToolResults))
			}
			if m.Role == api.RoleAssistant {
				if snap != nil {
					atDelta[m.Seq] = snap
				}
				snap = nil
			}
		}
	}
	for _, m := range history {
		if !seen[m.Seq] {
			return 0, fmt.Errorf("message %d was never announced", m.Seq)
		}
	}
	var inputs []int64
	for _, m := range history {
		if m.Role != store.RoleAssistant {
			inputs = append(inputs, m.Seq)
			continue
		}
		if at := atDelta[m.Seq]; at != nil {
			for _, in := range inputs {
				if !at[in] {
					return 0, fmt.Errorf("input %d of the turn saved as %d was announced after the turn's first text delta", in, m.Seq)
				}
			}
		}
		inputs = nil
	}
	return len(atDelta), nil
}

func eventList(evs []idEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		d := ev.data
		if len(d) > 160 {
			d = d[:160] + "…"
		}
		fmt.Fprintf(&b, "  %s %s\n", ev.typ, d)
	}
	return b.String()
}

// A client that connects while a completion streams finds the inputs
// that completion answers in its replay, before the text streamed so far,
// and never again live: on SQLite, on PostgreSQL, and from another process
// sharing the database.
func TestClientJoiningMidTurnSeesItsInputs(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { joinMidTurn(t, envOptions{}, false) })
	t.Run("postgres", func(t *testing.T) { joinMidTurn(t, envOptions{postgres: true}, false) })
	t.Run("two processes", func(t *testing.T) { joinMidTurn(t, envOptions{pgURL: pgtest.URL(t)}, true) })
}

func joinMidTurn(t *testing.T, o envOptions, twoProcesses bool) {
	g := newGated(2)
	o.model = g
	envs := []*env{newEnv(t, o)}
	if twoProcesses {
		envs = append(envs, newEnv(t, o))
	}
	root := envs[0].newThread()
	envs[0].post(root, "hello there")
	g.step <- struct{}{} // the first piece streams
	poll(t, "the first piece streamed", func() bool {
		for _, x := range envs {
			x.rt.hub.mu.Lock()
			tt := x.rt.hub.turns[root]
			streamed := tt != nil && tt.text.Len() > 0
			x.rt.hub.mu.Unlock()
			if streamed {
				return true
			}
		}
		return false
	})
	for i, x := range envs {
		s := openIDStream(t, x.srv.URL, root, "", false)
		replay := s.until(t, EventReplayDone)
		users := 0
		for _, ev := range replay {
			if ev.typ == EventMessage && strings.Contains(ev.data, `"hello there"`) {
				users++
			}
		}
		if users != 1 {
			t.Fatalf("client of process %d: the replay during the completion has the user's message %d times, want once:\n%s", i, users, eventList(replay))
		}
		defer func(s *idStream, i int) {
			for _, ev := range s.untilMessage(t, `"assistant"`) {
				if ev.typ == EventMessage && strings.Contains(ev.data, `"hello there"`) {
					t.Errorf("client of process %d got the user's message again after the replay", i)
				}
			}
		}(s, i)
	}
	g.step <- struct{}{} // the second piece; the turn is saved
}

// A completion that fails leaves its inputs queued; when they are
// answered later, with a new message, a client that watched throughout
// saw each message announced once, before the text that answers them.
func TestFailedCompletionDoesNotAnnounceItsInputsTwice(t *testing.T) {
	var calls atomic.Int32
	m := &fnModelErr{fn: func(req model.Request) (*model.Response, error) {
		if calls.Add(1) == 1 {
			return nil, fmt.Errorf("the model is overloaded")
		}
		return &model.Response{Text: "answered both"}, nil
	}}
	e := newEnv(t, envOptions{model: m})
	root := e.newThread()
	s := openIDStream(t, e.srv.URL, root, "", false)
	s.until(t, EventReplayDone)
	e.post(root, "first")
	evs := s.until(t, EventError)
	e.post(root, "second")
	evs = append(evs, s.untilMessage(t, "answered both")...)
	h := e.history(root)
	if n, err := checkCausal(evs, h); err != nil || n != 1 {
		t.Fatalf("%d turns streamed, %v\nevents:\n%s\nhistory:\n%s", n, err, eventList(evs), dump(h))
	}
}

// fnModelErr is a model.Provider whose answers, or errors, a test
// computes; it streams the text of an answer as one delta.
type fnModelErr struct {
	fn func(req model.Request) (*model.Response, error)
}

func (f *fnModelErr) Name() string         { return "test function model" }
func (f *fnModelErr) SupportsImages() bool { return false }
func (f *fnModelErr) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	resp, err := f.fn(req)
	if err != nil {
		return nil, err
	}
	s.TextDelta(resp.Text)
	return resp, nil
}
