package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// stateOfThread reads the thread's state as GET /v1/threads/{id} says it.
func stateOfThread(t *testing.T, e *env, id string) api.ThreadState {
	t.Helper()
	info, err := e.rt.ThreadInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// waitState polls until the thread is in state want.
func waitState(t *testing.T, e *env, id string, want api.ThreadState) {
	t.Helper()
	var got api.ThreadState
	poll(t, "thread state "+string(want), func() bool {
		got = stateOfThread(t, e, id)
		return got == want
	})
}

var stackOfRe = regexp.MustCompile(`Your thread stack, root first: (\[[^\]]*\])`)

// A thread's state says where it stands, its children included: asleep
// (waiting_timer), waiting for a tool (waiting_tools) or for the user
// (waiting_user), waiting on a child thread that waits for a tool
// (waiting_children), quiet once nothing is pending anywhere, closed; and
// each turn's end is announced with the state it left, on the thread and
// on its ancestors.
func TestThreadStates(t *testing.T) { testThreadStates(t, false) }

// TestThreadStatesOnPostgres: the same on a PostgreSQL store, which reads
// a thread's records for turn_ended in one exchange with the database.
func TestThreadStatesOnPostgres(t *testing.T) {
	pgtest.Require(t)
	testThreadStates(t, true)
}

func testThreadStates(t *testing.T, postgres bool) {
	ts := newToolServer(t, "jobs", tool("job"))
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		switch {
		case in.user == "nap":
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSleep, map[string]any{"seconds": 3600})}}
		case in.user == "work":
			return &model.Response{ToolCalls: []model.ToolCall{toolCall("job", map[string]any{})}}
		case in.user == "delegate":
			var stack []string
			json.Unmarshal([]byte(stackOfRe.FindStringSubmatch(req.System)[1]), &stack)
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSpawnThread, map[string]any{"instructions": "do the job", "child_of": stack})}}
		case strings.Contains(in.result, "You are now inside the spawned thread"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall("job", map[string]any{})}}
		}
		return &model.Response{Text: "done"}
	}}
	e := newEnv(t, envOptions{model: m, servers: []string{ts.URL()}, postgres: postgres})
	root := e.newThread()
	s := openIDStream(t, e.srv.URL, root, "", false)
	s.until(t, EventReplayDone)
	if got := stateOfThread(t, e, root); got != api.StateQuiet {
		t.Fatalf("a new thread is %s, want quiet", got)
	}

	e.post(root, "nap")
	waitState(t, e, root, api.StateWaitingTimer)
	// turn_ended tells the state when it is published, once the worker has
	// let the thread go: each is awaited before the next step, which would
	// change the state it tells.
	var ends []api.TurnEnded
	waitEnd := func(id string, want api.ThreadState) {
		t.Helper()
		for len(ends) == 0 || ends[len(ends)-1].ThreadID != id || ends[len(ends)-1].State != want {
			if ev := s.next(t); ev.typ == EventTurnEnded {
				var te api.TurnEnded
				if err := json.Unmarshal([]byte(ev.data), &te); err != nil {
					t.Fatal(err)
				}
				ends = append(ends, te)
			}
		}
	}
	waitEnd(root, api.StateWaitingTimer)

	e.post(root, "work") // interrupts the sleep (RAP CA-1)
	inv := ts.next()
	waitState(t, e, root, api.StateWaitingTools)
	if status, body := callback(t, inv.CallbackURL, rap.UserChoice{GroupID: root, ID: inv.ID, Prompt: "Go?", Choices: []string{"yes", "no"}, ResponseURL: ts.URL() + "/choice"}); status != 200 {
		t.Fatalf("user_choice: %d %s", status, body)
	}
	waitState(t, e, root, api.StateWaitingUser)
	reply(t, inv, "job done")
	waitState(t, e, root, api.StateQuiet)
	waitEnd(root, api.StateQuiet)

	e.post(root, "delegate")
	child := ts.next() // the child's call
	waitState(t, e, root, api.StateWaitingChildren)
	// The child's call reaches the tool before the child's worker lets the
	// thread go: the child comes to wait for its tool.
	waitState(t, e, child.GroupID, api.StateWaitingTools)
	waitEnd(root, api.StateWaitingChildren)
	reply(t, child, "child job done")
	waitState(t, e, child.GroupID, api.StateQuiet)
	waitState(t, e, root, api.StateQuiet)

	// The stream told each turn's end with the state it left, the
	// child's too (on its parent's stream), and ended quiet.
	waitEnd(child.GroupID, api.StateQuiet)
	var states []string
	for _, te := range ends {
		who := "root"
		if te.ThreadID != root {
			who = "child"
		}
		states = append(states, who+":"+string(te.State))
	}
	got := strings.Join(states, " ")
	for _, want := range []string{"root:waiting_timer", "root:waiting_tools", "root:quiet", "root:waiting_children", "child:quiet"} {
		if !strings.Contains(got, want) {
			t.Errorf("turn_ended events %q lack %q", got, want)
		}
	}

	if err := e.rt.CloseThread(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, root, api.StateClosed)
}

// A thread whose completion failed is failed, not running, while its
// input waits for the retry; WaitQuiet-style clients stop there.
func TestThreadStateFailed(t *testing.T) {
	m := &fnModelErr{fn: func(req model.Request) (*model.Response, error) {
		return nil, errors.New("the model is overloaded")
	}}
	for _, o := range []envOptions{{}, {postgres: true}} {
		e := newEnv(t, envOptions{model: m, postgres: o.postgres})
		root := e.newThread()
		e.post(root, "hello")
		waitState(t, e, root, api.StateFailed)
		e.rt.store.View(context.Background(), func(tx store.Tx) error {
			q, _ := tx.Queued(root)
			if len(q) != 1 {
				t.Errorf("%d inputs queued, want the message kept", len(q))
			}
			return nil
		})
	}
}

// turn_ended is an event of the stream like the others: a client that
// was away when a turn ended gets it when it resumes with its last event
// id, on SQLite and on PostgreSQL.
func TestTurnEndedReplayedOnResume(t *testing.T) {
	for _, o := range []envOptions{{}, {postgres: true}} {
		e := newEnv(t, envOptions{model: &fnModel{fn: func(model.Request) *model.Response { return &model.Response{Text: "hi"} }}, postgres: o.postgres})
		root := e.newThread()
		s := openIDStream(t, e.srv.URL, root, "", false)
		last := ""
		for _, ev := range s.until(t, EventReplayDone) {
			last = ev.id
		}
		s.close()
		e.post(root, "hello")
		waitState(t, e, root, api.StateQuiet)
		r := openIDStream(t, e.srv.URL, root, last, false)
		for {
			ev := r.next(t)
			if ev.typ == EventReset {
				t.Fatalf("the stream could not resume: %s", ev.data)
			}
			if ev.typ == EventTurnEnded {
				if !strings.Contains(ev.data, `"state":"quiet"`) || ev.id == "" {
					t.Fatalf("turn_ended %s (id %q), want state quiet with an id", ev.data, ev.id)
				}
				break
			}
		}
		r.close()
	}
}
