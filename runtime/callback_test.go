package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// pendingCall starts a thread whose model called tool "job" and returns
// the env, the thread and the invocation, with the call pending.
func pendingCall(t *testing.T, turns ...scripted.Turn) (*env, string, rap.Invocation) {
	t.Helper()
	ts := newToolServer(t, "jobs", tool("job"), tool("other"))
	if len(turns) == 0 {
		turns = []scripted.Turn{
			{ToolCalls: []scripted.Call{call("job", `{}`)}},
			{Text: "got {{last_result}}", Repeat: true},
		}
	}
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: turns})
	th := e.newThread()
	e.post(th, "start")
	inv := ts.next()
	e.idle(th)
	return e, th, inv
}

// snapshot is everything a callback could change.
func snapshot(t *testing.T, e *env, threads ...string) string {
	t.Helper()
	var sb strings.Builder
	err := e.st.View(context.Background(), func(tx store.Tx) error {
		for _, th := range threads {
			h, err := tx.History(th)
			if err != nil {
				return err
			}
			q, err := tx.Queued(th)
			if err != nil {
				return err
			}
			cs, err := tx.ThreadCalls(th)
			if err != nil {
				return err
			}
			for i := range cs {
				cs[i].Updated = cs[i].Created // SetCallState with no effect must not matter
			}
			vs, err := tx.ThreadViews(th)
			if err != nil {
				return err
			}
			b, _ := json.Marshal([]any{h, q, cs, vs})
			sb.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// RAP RE-5, TR-7: a forged token, a token for another call, a token for an
// unknown call and a mismatched group_id all get a 4xx and change no
// history. The genuine result still works afterwards.
func TestRE5ForgedCallbacksChangeNothing(t *testing.T) {
	e, th, inv := pendingCall(t)
	other := e.newThread()
	before := snapshot(t, e, th, other)
	good := rap.ToolResult{GroupID: th, ID: inv.ID, Text: "forged"}
	tok := strings.TrimPrefix(inv.CallbackURL, e.srv.URL+CallbackPath)
	parts := strings.Split(tok, ".")
	base := e.srv.URL + CallbackPath
	flip := []byte(parts[2])
	if flip[0] == 'A' {
		flip[0] = 'B'
	} else {
		flip[0] = 'A'
	}
	cases := []struct {
		name   string
		url    string
		body   any
		status int
	}{
		{"random token", base + "bm90LWEtdG9rZW4", good, http.StatusForbidden},
		{"wrong MAC", base + parts[0] + "." + parts[1] + "." + string(flip), good, http.StatusForbidden},
		{"MAC of another secret", base + forgeToken(th, inv.ID), good, http.StatusForbidden},
		{"token for another call, body for this one", e.rt.callbackURL(th, "call_other"), good, http.StatusNotFound},
		{"token for this call, body for another id", inv.CallbackURL, rap.ToolResult{GroupID: th, ID: "call_other", Text: "x"}, http.StatusForbidden},
		{"token for this call, body for another thread", inv.CallbackURL, rap.ToolResult{GroupID: other, ID: inv.ID, Text: "x"}, http.StatusForbidden},
		{"valid token of an unknown call", e.rt.callbackURL(other, inv.ID), rap.ToolResult{GroupID: other, ID: inv.ID, Text: "x"}, http.StatusNotFound},
		{"valid token of an unknown thread", e.rt.callbackURL("no-such-thread", "c1"), rap.ToolResult{GroupID: "no-such-thread", ID: "c1", Text: "x"}, http.StatusNotFound},
		{"no token", strings.TrimSuffix(base, "/"), good, http.StatusNotFound},
	}
	for _, c := range cases {
		status, body := callback(t, c.url, c.body)
		if status != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, status, body, c.status)
		}
	}
	e.idle(th)
	e.idle(other)
	if after := snapshot(t, e, th, other); after != before {
		t.Fatalf("a refused callback changed the store:\nbefore %s\nafter  %s", before, after)
	}
	if len(e.logs.records("callback discarded: unknown tool call (RAP RE-5)")) < 2 {
		t.Fatalf("unknown (group, id) pairs were not logged:\n%s", e.logs)
	}
	reply(t, inv, "genuine")
	e.waitHistory(th, "the genuine result", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got genuine") })
}

// forgeToken makes a well-formed token with a MAC under another key.
func forgeToken(thread, call string) string {
	r := &Runtime{cfg: Config{Secret: []byte("not-the-runtime-secret-0123456789")}}
	return r.callbackToken(thread, call)
}

// RAP RE-6, RE-7: a result is answered 200 on receipt; a redelivered one is
// answered 200 too and appears once; an Idempotency-Key replay is
// recognised as well.
func TestRE6DuplicateResultAddedOnce(t *testing.T) {
	e, th, inv := pendingCall(t)
	res := rap.ToolResult{GroupID: th, ID: inv.ID, Text: "42"}
	for i := 0; i < 3; i++ {
		status, body := callback(t, inv.CallbackURL, res, rap.IdempotencyKeyHeader, "k1")
		if status != http.StatusOK {
			t.Fatalf("delivery %d: %d %s", i, status, body)
		}
	}
	// A redelivery with another key and changed text is still the same
	// call's result.
	res.Text = "43"
	if status, body := callback(t, inv.CallbackURL, res, rap.IdempotencyKeyHeader, "k2"); status != http.StatusOK || !strings.Contains(body, "duplicate") {
		t.Fatalf("redelivery: %d %s", status, body)
	}
	e.waitHistory(th, "answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got 42") })
	e.idle(th)
	if rs := results(e.history(th)); len(rs) != 1 || rs[0].Text != "42" {
		t.Fatalf("results = %+v, want exactly one", rs)
	}
}

// RAP CA-2: the result of a cancelled call is answered 200 and ignored.
func TestCA2CancelledCallResultIgnored(t *testing.T) {
	e, th, inv := pendingCall(t)
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		ok, err := tx.SetCallState(th, inv.ID, store.CallCancelled, store.CallNew, store.CallDispatched)
		if !ok && err == nil {
			t.Errorf("call %s was not pending", inv.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, e, th)
	status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "too late"})
	if status != http.StatusOK || !strings.Contains(body, "cancelled") {
		t.Fatalf("result of a cancelled call: %d %s", status, body)
	}
	e.idle(th)
	if after := snapshot(t, e, th); after != before {
		t.Fatalf("a cancelled call's result changed the store")
	}
}

// RAP TR-5: invalid bodies get 400 naming the field; oversized bodies 413;
// neither changes anything.
func TestTR5InvalidCallbackBodies(t *testing.T) {
	e, th, inv := pendingCall(t)
	before := snapshot(t, e, th)
	cases := []struct {
		body   string
		status int
		want   string
	}{
		{`not json`, 400, "expected a JSON object"},
		{`{"type":"tool_result","id":"` + inv.ID + `","text":"x"}`, 400, "group_id"},
		{`{"type":"tool_result","group_id":"` + th + `","text":"x"}`, 400, "id"},
		// A result without text is an empty result; an image without data is
		// refused.
		{`{"type":"tool_result","group_id":"` + th + `","id":"` + inv.ID + `","content":[{"type":"image","data":"","mediaType":"image/png"}]}`, 400, "content[0].data"},
		{`{"type":"tool_result","group_id":"` + th + `","id":"` + inv.ID + `","text":5}`, 400, "text: must be a string"},
		{`{"type":"bogus","group_id":"` + th + `"}`, 400, "unknown message type"},
		{`{"type":"tool_result","group_id":"` + th + `","id":"` + inv.ID + `","text":"` + strings.Repeat("x", MaxCallbackBytes) + `"}`, 413, "larger than"},
	}
	for _, c := range cases {
		status, body := callback(t, inv.CallbackURL, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("body %.60q: %d %s; want %d mentioning %q", c.body, status, body, c.status, c.want)
		}
	}
	if after := snapshot(t, e, th); after != before {
		t.Fatalf("an invalid callback changed the store")
	}
}

// RAP SU-3: a result with subscription: true records an active
// subscription; its associative events reach the thread inline as a
// synthetic injected call (RAP SU-5, SU-6), and events after final: true
// are discarded (RAP SU-4).
func TestSubscriptionResultAndEvents(t *testing.T) {
	e, th, inv := pendingCall(t,
		scripted.Turn{ToolCalls: []scripted.Call{call("job", `{}`)}},
		scripted.Turn{Text: "noted", Repeat: true},
	)
	status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "subscribed: sub-1", Subscription: true})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	e.waitHistory(th, "answer", func(h []store.Message) bool { return len(h) == 4 })
	var sub store.Subscription
	e.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		sub, err = tx.Subscription(th, inv.ID)
		return err
	})
	if sub.State != store.SubscriptionActive || sub.ToolName != "job" {
		t.Fatalf("subscription = %+v", sub)
	}
	for i, ev := range []rap.SubscriptionEvent{
		{GroupID: th, ToolCallID: inv.ID, Text: `{"n":1}`, Associative: true},
		{GroupID: th, ToolCallID: inv.ID, Text: `{"n":2}`, Final: true, Associative: true},
		{GroupID: th, ToolCallID: inv.ID, Text: `{"n":3}`, Associative: true},
	} {
		want := http.StatusOK
		if i == 2 {
			want = http.StatusGone // after final
		}
		if status, body := callback(t, inv.CallbackURL, ev); status != want {
			t.Fatalf("event %d: %d %s, want %d", i+1, status, body, want)
		}
	}
	e.waitHistory(th, "two injected events", func(h []store.Message) bool {
		n := 0
		for _, c := range calls(h) {
			if c.Name == InjectedToolName {
				n++
			}
		}
		return n == 2
	})
	e.idle(th)
	h := e.history(th)
	var texts []string
	for _, r := range results(h) {
		if r.Name == InjectedToolName {
			texts = append(texts, r.Text)
		}
	}
	if strings.Join(texts, ",") != `{"n":1},{"n":2}` {
		t.Fatalf("injected events = %v; the one after final must be discarded", texts)
	}
	for _, c := range calls(h) {
		if c.Name == InjectedToolName && !strings.Contains(string(c.Arguments), `"original_tool_name":"job"`) {
			t.Fatalf("injected call arguments = %s", c.Arguments)
		}
	}
	if err := validAlternation(e.model.requests()[len(e.model.requests())-1].Messages); err != nil {
		t.Fatal(err)
	}
}

// RAP VU-2: the latest view per (thread, view type) is stored, broadcast,
// and sent to a client when it connects.
func TestViewUpdateStoredAndStreamed(t *testing.T) {
	e, th, inv := pendingCall(t)
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	for _, c := range []string{`{"v":1}`, `{"v":2}`} {
		if status, body := callback(t, inv.CallbackURL, rap.ViewUpdate{GroupID: th, ViewType: "progress", Content: json.RawMessage(c)}); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	ev := waitEvent(t, events, EventView)
	if !strings.Contains(string(ev.Data), `"view_type":"progress"`) {
		t.Fatalf("view event = %s", ev.Data)
	}
	prime, err := e.rt.primeEvents(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	var views []string
	for _, p := range prime {
		if p.Type == EventView {
			views = append(views, string(p.Data))
		}
	}
	if len(views) != 1 || !strings.Contains(views[0], `{"v":2}`) {
		t.Fatalf("views sent on connect = %v, want the latest only", views)
	}
	if h := e.history(th); len(results(h)) != 0 {
		t.Fatalf("a view update changed the history")
	}
}
