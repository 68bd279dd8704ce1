package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// A full round trip: the model calls a tool, the tool answers on its
// callback URL, the model answers with the result.
func TestToolRoundTrip(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "It is {{last_result}}."},
	}})
	th := e.newThread()
	e.post(th, "what time is it?")
	inv := ts.next()
	reply(t, inv, "12:00 UTC")
	h := e.waitHistory(th, "the final answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "It is 12:00 UTC.") })
	roles := []store.Role{}
	for _, m := range h {
		roles = append(roles, m.Role)
	}
	want := []store.Role{store.RoleUser, store.RoleAssistant, store.RoleTool, store.RoleAssistant}
	if fmt.Sprint(roles) != fmt.Sprint(want) {
		t.Fatalf("roles = %v, want %v\n%s", roles, want, dump(h))
	}
	if h[2].ToolResults[0].CallID != inv.ID || h[2].ToolResults[0].Name != "get_time" {
		t.Fatalf("result not tied to its call: %+v", h[2].ToolResults[0])
	}
}

// RAP RT-1: the turn is persisted before its tool call is dispatched. The
// tool server reads the thread's history through the runtime's HTTP API
// when the invocation arrives, and must find the call there.
func TestRT1TurnPersistedBeforeDispatch(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	var e *env
	var found atomic.Bool
	var checked atomic.Bool
	ts.onInvoke = func(inv rap.Invocation) int {
		resp, err := http.Get(e.srv.URL + "/v1/threads/" + inv.GroupID + "/messages")
		if err != nil {
			t.Errorf("read history from the tool: %v", err)
			return http.StatusOK
		}
		defer resp.Body.Close()
		var body struct{ Messages []store.Message }
		json.NewDecoder(resp.Body).Decode(&body)
		for _, m := range body.Messages {
			for _, c := range m.ToolCalls {
				if c.ID == inv.ID && m.Role == store.RoleAssistant {
					found.Store(true)
				}
			}
		}
		checked.Store(true)
		return http.StatusOK
	}
	e = newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{Text: "checking", ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "done"},
	}})
	th := e.newThread()
	e.post(th, "time?")
	inv := ts.next()
	if !checked.Load() || !found.Load() {
		t.Fatalf("when the invocation arrived the assistant turn with call %s was not in the history (RAP RT-1)", inv.ID)
	}
	// The user message of the slice was persisted with it.
	h := e.history(th)
	if len(h) < 2 || h[0].Role != store.RoleUser || h[0].Text != "time?" {
		t.Fatalf("history = %s", dump(h))
	}
}

// gate is a provider that blocks completions until released and detects
// overlapping completions per conversation (keyed by its first user text).
type gate struct {
	inner   model.Provider
	mu      sync.Mutex
	active  map[string]int
	overlap []string
	maxAll  int
	all     int
	hold    func(key string) // called inside Complete, may block
}

func (g *gate) Name() string         { return "gate" }
func (g *gate) SupportsImages() bool { return false }

func (g *gate) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	key := ""
	if len(req.Messages) > 0 {
		key, _, _ = strings.Cut(req.Messages[0].Text, "\n")
	}
	g.mu.Lock()
	g.active[key]++
	g.all++
	g.maxAll = max(g.maxAll, g.all)
	if g.active[key] > 1 {
		g.overlap = append(g.overlap, key)
	}
	g.mu.Unlock()
	if g.hold != nil {
		g.hold(key)
	}
	defer func() {
		g.mu.Lock()
		g.active[key]--
		g.all--
		g.mu.Unlock()
	}()
	return g.inner.Complete(ctx, req, s)
}

// RAP RT-2: messages of one thread are processed strictly one at a time,
// and the messages queued meanwhile are drained as one batch.
func TestRT2OneSliceAtATimePerThread(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	g := &gate{inner: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), active: map[string]int{}}
	var first atomic.Bool
	g.hold = func(string) {
		entered <- struct{}{}
		if first.CompareAndSwap(false, true) {
			<-release
		}
	}
	e := newEnv(t, envOptions{model: g})
	th := e.newThread()
	e.post(th, "m0")
	<-entered // the first slice is running and blocked in the model
	for i := 1; i <= 4; i++ {
		e.post(th, fmt.Sprintf("m%d", i))
	}
	close(release)
	e.idle(th)
	if len(g.overlap) > 0 {
		t.Fatalf("completions of one thread overlapped: %v (RAP RT-2)", g.overlap)
	}
	if n := len(e.model.requests()); n != 2 {
		t.Fatalf("ran %d completions, want 2: the 4 messages queued during the first slice form one batch", n)
	}
	h := e.history(th)
	var users []string
	for _, m := range h {
		if m.Role == store.RoleUser {
			users = append(users, m.Text)
		}
	}
	if fmt.Sprint(users) != "[m0 m1 m2 m3 m4]" {
		t.Fatalf("user messages in history = %v, want each once in order", users)
	}
}

// RAP RT-2: different threads run concurrently: two completions, one per
// thread, must be inside the model at the same time.
func TestRT2ThreadsRunConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(2)
	var timedOut atomic.Bool
	g := &gate{inner: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), active: map[string]int{}}
	g.hold = func(string) {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitFor):
			timedOut.Store(true)
		}
	}
	e := newEnv(t, envOptions{model: g})
	a, b := e.newThread(), e.newThread()
	e.post(a, "thread a")
	e.post(b, "thread b")
	e.idle(a)
	e.idle(b)
	if timedOut.Load() || g.maxAll < 2 {
		t.Fatalf("the two threads' completions never ran at the same time (max concurrent %d) (RAP RT-2)", g.maxAll)
	}
}

// RAP RT-3, CA-1, CA-2: a user message that arrives while a tool call is
// pending is processed at once. The pending call is first closed with a
// synthetic "interrupted" result (so the history the model gets is valid),
// the tool server is sent /cancel_tool_call, and the call's late result is
// ignored.
func TestRT3UserMessageInterruptsPendingCall(t *testing.T) {
	ts := newToolServer(t, "slow", tool("slow_job"))
	cancels := make(chan rap.CancelToolCallRequest, 10)
	ts.onOther = func(r *http.Request, body []byte) {
		if r.URL.Path == rap.CancelToolCallPath {
			req, err := rap.DecodeCancelToolCall(body)
			if err != nil {
				t.Errorf("cancel_tool_call body %s: %v", body, err)
				return
			}
			cancels <- *req
		}
	}
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{AfterUser: "start", Text: "starting", ToolCalls: []scripted.Call{call("slow_job", `{}`)}},
		{AfterUser: "status", Text: "still waiting"},
		{Text: "anything else", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "start the job")
	inv := ts.next()
	e.idle(th)
	e.post(th, "status?")
	h := e.waitHistory(th, "the answer to the second message", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "still waiting") })
	c, err := callState(e, th, inv.ID)
	if err != nil || c != store.CallCancelled {
		t.Fatalf("call state = %v, %v; want cancelled", c, err)
	}
	// The interrupted result comes before the user message in the history.
	resAt, userAt := -1, -1
	for i, m := range h {
		for _, r := range m.ToolResults {
			if r.CallID == inv.ID && r.Text == interruptedText {
				resAt = i
			}
		}
		if m.Role == store.RoleUser && m.Text == "status?" {
			userAt = i
		}
	}
	if resAt < 0 || resAt > userAt {
		t.Fatalf("interrupted result at %d, user message at %d; want the result first\n%s", resAt, userAt, dump(h))
	}
	reqs := e.model.requests()
	last := reqs[len(reqs)-1]
	if !requestHasResult(last, inv.ID, interruptedText) {
		t.Fatalf("the model was not given the interrupted result: %+v", last.Messages)
	}
	if err := validAlternation(last.Messages); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-cancels:
		if req.ThreadID != th || req.ToolCallID != inv.ID {
			t.Fatalf("cancel_tool_call = %+v, want thread %s call %s (RAP CA-1)", req, th, inv.ID)
		}
	case <-time.After(waitFor):
		t.Fatal("no /cancel_tool_call reached the tool server (RAP CA-1)")
	}
	// RAP CA-2: the late result is acknowledged and ignored.
	n := len(e.history(th))
	status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "job finished: 42"})
	if status != http.StatusOK || !strings.Contains(body, "cancelled") {
		t.Fatalf("late result: %d %s", status, body)
	}
	e.idle(th)
	if h := e.history(th); len(h) != n || strings.Contains(dump(h), "job finished") {
		t.Fatalf("a late result of an interrupted call reached the history:\n%s", dump(h))
	}
}

func callState(e *env, thread, id string) (store.CallState, error) {
	var c store.Call
	err := e.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		c, err = tx.Call(thread, id)
		return err
	})
	return c.State, err
}

func requestHasResult(req model.Request, callID, text string) bool {
	for _, m := range req.Messages {
		for _, r := range m.ToolResults {
			if r.CallID == callID && r.Text == text {
				return true
			}
		}
	}
	return false
}

// validAlternation checks what Anthropic and OpenAI require: every
// assistant tool call is answered in the very next message, and roles
// alternate.
func validAlternation(msgs []model.Message) error {
	for i, m := range msgs {
		if i > 0 && msgs[i-1].Role == m.Role {
			return fmt.Errorf("messages %d and %d both have role %s", i-1, i, m.Role)
		}
		if m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		if i+1 >= len(msgs) {
			return fmt.Errorf("message %d: tool calls without results", i)
		}
		got := map[string]bool{}
		for _, r := range msgs[i+1].ToolResults {
			got[r.CallID] = true
		}
		for _, c := range m.ToolCalls {
			if !got[c.ID] {
				return fmt.Errorf("message %d: call %s has no result in the next message", i, c.ID)
			}
		}
	}
	return nil
}

// flaky fails its first n completions.
type flaky struct {
	model.Provider
	fails atomic.Int32
}

func (f *flaky) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, errors.New("model unavailable (HTTP 529)")
	}
	return f.Provider.Complete(ctx, req, s)
}

// RAP RT-4: a model failure keeps the incoming message, reports the error,
// and the next message retries it.
func TestRT4ModelFailureKeepsMessage(t *testing.T) {
	f := &flaky{Provider: scripted.New([]scripted.Turn{{Text: "hello back", Repeat: true}})}
	f.fails.Store(1)
	e := newEnv(t, envOptions{model: f})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	e.post(th, "first")
	ctx, stop := context.WithTimeout(context.Background(), waitFor)
	defer stop()
	if err := e.rt.Idle(ctx, th); !errors.Is(err, ErrSliceFailed) {
		t.Fatalf("Idle = %v, want ErrSliceFailed", err)
	}
	if ev := waitEvent(t, events, EventError); !strings.Contains(string(ev.Data), "model unavailable") {
		t.Fatalf("error event does not carry the cause: %s", ev.Data)
	}
	if h := e.history(th); len(h) != 0 {
		t.Fatalf("history after the failure = %s, want empty (the message stays queued)", dump(h))
	}
	e.post(th, "second")
	e.idle(th)
	h := e.history(th)
	if len(h) != 3 || h[0].Text != "first" || h[1].Text != "second" || h[2].Text != "hello back" {
		t.Fatalf("history = %s; want both messages once, then the answer", dump(h))
	}
	if !strings.Contains(e.logs.String(), "model unavailable") {
		t.Fatalf("the failure was not logged")
	}
}

func waitEvent(t *testing.T, ch <-chan Event, typ string) Event {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event stream closed before a %q event", typ)
			}
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q event", typ)
		}
	}
}

// RAP RT-5: a per-tool timeout produces a synthetic error result; the
// deadline is durable, so it fires after a restart too; a late real result
// is then ignored.
func TestRT5ToolTimeoutSurvivesRestart(t *testing.T) {
	ts := newToolServer(t, "slow", tool("slow_job"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("slow_job", `{}`)}},
		{When: &scripted.When{LastResultContains: "timed out"}, Text: "the job timed out"},
	}, tweak: func(c *Config) { c.ToolTimeouts = map[string]time.Duration{"slow_job": 1500 * time.Millisecond} }})
	th := e.newThread()
	e.post(th, "run it")
	inv := ts.next()
	e.idle(th)
	e.stop()
	// The deadline has not passed in the first runtime: the call is still
	// pending when it stops, so only the restarted runtime can time it out.
	e.offline(func(tx store.Tx) error {
		c, err := tx.Call(th, inv.ID)
		if err == nil && c.State != store.CallDispatched {
			t.Fatalf("call state at shutdown = %s, want dispatched", c.State)
		}
		return err
	})
	e.start()
	h := e.waitHistory(th, "the timeout result", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "the job timed out") })
	rs := results(h)
	if len(rs) != 1 || !rs[0].IsError || !strings.HasPrefix(rs[0].Text, "Error: tool slow_job timed out after 1.5s") {
		t.Fatalf("results = %+v", rs)
	}
	status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "late"})
	if status != http.StatusOK || !strings.Contains(body, "duplicate") {
		t.Fatalf("late result: %d %s; want 200 duplicate", status, body)
	}
	e.idle(th)
	if got := results(e.history(th)); len(got) != 1 {
		t.Fatalf("late result was added: %+v", got)
	}
}

// RAP RT-6: every invocation is logged for audit with operation, thread,
// call id, time and outcome — accepted and failed alike.
func TestRT6AuditLog(t *testing.T) {
	ok := newToolServer(t, "good", tool("works"))
	bad := newToolServer(t, "bad", tool("breaks"))
	bad.onInvoke = func(rap.Invocation) int { return http.StatusBadRequest }
	e := newEnv(t, envOptions{servers: []string{ok.URL(), bad.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("works", `{}`), call("breaks", `{}`)}},
		{Text: "done", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "go")
	inv := ok.next()
	e.waitHistory(th, "the failed dispatch's error result", func(h []store.Message) bool { return len(results(h)) == 1 })
	// The accepted call's record is written once its answer is read,
	// which may come after the failed call's result is saved: wait for
	// both records.
	outcomes := map[string]string{}
	for deadline := time.Now().Add(waitFor); ; time.Sleep(10 * time.Millisecond) {
		clear(outcomes)
		for _, r := range e.logs.records("rap invocation") {
			if r["thread"] != th || r["call_id"] == "" || r["time"] == nil || r["started"] == nil || r["audit"] != true {
				t.Fatalf("audit record lacks a field: %v", r)
			}
			outcomes[r["operation"].(string)] = r["outcome"].(string)
		}
		if len(outcomes) == 2 || time.Now().After(deadline) {
			break
		}
	}
	if outcomes["works"] != "accepted" || outcomes["breaks"] != "failed" {
		t.Fatalf("audit outcomes = %v\nlog:\n%s", outcomes, e.logs)
	}
	// One time key per record: a second one (the start of the call) made
	// log processors keep either, and duplicate keys are not portable JSON.
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"rap invocation"`) && strings.Count(line, `"time":`) != 1 {
			t.Errorf("audit record with %d time keys: %s", strings.Count(line, `"time":`), line)
		}
	}
	if strings.Contains(e.logs.String(), inv.CallbackURL) || strings.Contains(e.logs.String(), "/rap/callback/") {
		t.Fatalf("a callback token reached the log")
	}
}

// RAP TR-3, TR-4: 5xx answers are retried with backoff; a 4xx is not
// retried and becomes an error result the model sees.
func TestDispatchRetries(t *testing.T) {
	flakySrv := newToolServer(t, "flaky", tool("flaky_tool"))
	var n atomic.Int32
	flakySrv.onInvoke = func(rap.Invocation) int {
		if n.Add(1) <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	refusing := newToolServer(t, "refusing", tool("refused_tool"))
	var m atomic.Int32
	refusing.onInvoke = func(rap.Invocation) int { m.Add(1); return http.StatusForbidden }
	e := newEnv(t, envOptions{servers: []string{flakySrv.URL(), refusing.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("flaky_tool", `{}`), call("refused_tool", `{}`)}},
		{Text: "done", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "go")
	flakySrv.next()
	h := e.waitHistory(th, "the refused call's error result", func(h []store.Message) bool { return len(results(h)) == 1 })
	if n.Load() != 3 {
		t.Fatalf("flaky tool got %d attempts, want 3 (two 503 then 200)", n.Load())
	}
	if m.Load() != 1 {
		t.Fatalf("refusing tool got %d attempts, want 1: a 4xx is never retried (RAP TR-3)", m.Load())
	}
	r := results(h)[0]
	if !r.IsError || !strings.HasPrefix(r.Text, "Error: ") || !strings.Contains(r.Text, "403") {
		t.Fatalf("error result = %+v (RAP TR-4)", r)
	}
}

// RAP IN-2: the invocation carries the loaded tool's name, the arguments,
// the model's call id, a callback URL on the runtime, and the thread as
// group_id; a root thread sends no thread_ancestors.
func TestIN2InvocationFields(t *testing.T) {
	ts := newToolServer(t, "echo", echoTool())
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("echo", `{"text":"hi"}`)}},
		{Text: "done"},
	}})
	th := e.newThread()
	e.post(th, "echo hi")
	inv := ts.next()
	h := e.history(th)
	cs := calls(h)
	if len(cs) != 1 {
		t.Fatalf("calls = %+v", cs)
	}
	if inv.Operation != "echo" || string(inv.Arguments) != `{"text":"hi"}` || inv.ID != cs[0].ID || inv.GroupID != th ||
		len(inv.ThreadAncestors) != 0 || inv.CallID != "" {
		t.Fatalf("invocation = %+v", inv)
	}
	reqs := e.model.requests()
	if !strings.HasPrefix(cs[0].ID, "call_") {
		t.Fatalf("call id %q is not the model's", cs[0].ID)
	}
	_ = reqs
	if !strings.HasPrefix(inv.CallbackURL, e.srv.URL+CallbackPath) {
		t.Fatalf("callback_url %q is not on the runtime", inv.CallbackURL)
	}
	if cs[0].Display != `echo({"text":"hi"})` {
		t.Fatalf("default display = %q", cs[0].Display)
	}
}

// RAP IN-2: arguments that fail the input schema are never dispatched; the
// model gets an error result naming the problem and runs again in the same
// slice. An unknown tool name is handled the same way (RAP BT-7).
func TestIN2InvalidArgumentsAndUnknownToolNotDispatched(t *testing.T) {
	ts := newToolServer(t, "echo", echoTool())
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("echo", `{"txt":"hi"}`), call("no_such_tool", `{}`)}},
		{When: &scripted.When{LastInput: "tool_result"}, Text: "let me fix that"},
	}})
	th := e.newThread()
	e.post(th, "echo hi")
	e.idle(th)
	if invs := ts.invocations(); len(invs) != 0 {
		t.Fatalf("invalid calls were dispatched: %+v", invs)
	}
	h := e.history(th)
	rs := results(h)
	if len(rs) != 2 || !rs[0].IsError || !rs[1].IsError {
		t.Fatalf("results = %+v", rs)
	}
	if !strings.Contains(rs[0].Text, "echo") || !strings.Contains(rs[0].Text, "text") {
		t.Fatalf("invalid-arguments result does not name the problem: %q", rs[0].Text)
	}
	if !strings.Contains(rs[1].Text, `no tool named "no_such_tool"`) || !strings.Contains(rs[1].Text, "echo") {
		t.Fatalf("unknown-tool result = %q", rs[1].Text)
	}
	if !hasText(h, store.RoleAssistant, "let me fix that") {
		t.Fatalf("the model did not run again in the same slice:\n%s", dump(h))
	}
	if n := len(e.model.requests()); n != 2 {
		t.Fatalf("%d completions, want 2", n)
	}
	var pending []store.Call
	e.st.View(context.Background(), func(tx store.Tx) error {
		pending, _ = tx.ThreadCalls(th)
		return nil
	})
	if len(pending) != 0 {
		t.Fatalf("rejected calls were recorded as pending: %+v", pending)
	}
}

// Several tool calls in one turn are dispatched together, and the model
// runs once, when all their results are in.
func TestParallelCallsOneCompletionAfterAllResults(t *testing.T) {
	ts := newToolServer(t, "multi", tool("a"), tool("b"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("a", `{}`), call("b", `{}`)}},
		{Text: "both done: {{last_result}}"},
	}})
	th := e.newThread()
	e.post(th, "go")
	i1, i2 := ts.next(), ts.next()
	reply(t, i1, "first")
	e.idle(th)
	if n := len(e.model.requests()); n != 1 {
		t.Fatalf("the model ran after one of two results (%d completions)", n)
	}
	reply(t, i2, "second")
	h := e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "both done") })
	if n := len(e.model.requests()); n != 2 {
		t.Fatalf("%d completions, want 2\n%s", n, dump(h))
	}
	last := e.model.requests()[1]
	if err := validAlternation(last.Messages); err != nil {
		t.Fatal(err)
	}
	if len(last.Messages[2].ToolResults) != 2 {
		t.Fatalf("results not given together: %+v", last.Messages)
	}
}

// RAP RE-2: for a model without image input, image items become text
// placeholders and text items stay.
func TestRE2ImagesBecomePlaceholders(t *testing.T) {
	ts := newToolServer(t, "cam", tool("snap"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("snap", `{}`)}},
		{Text: "seen"},
	}})
	th := e.newThread()
	e.post(th, "snap")
	inv := ts.next()
	status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID,
		Content: []rap.ContentItem{rap.TextContent("a photo"), rap.ImageContent("aGVsbG8=", "image/png")}})
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	e.waitHistory(th, "answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "seen") })
	req := e.model.requests()[1]
	r := req.Messages[2].ToolResults[0]
	if len(r.Content) != 0 || !strings.Contains(r.Text, "a photo") || !strings.Contains(r.Text, "image/png omitted") || strings.Contains(r.Text, "aGVsbG8=") {
		t.Fatalf("result for a model without images = %+v", r)
	}
}

// Recovery: a message accepted before a restart and calls persisted but
// not dispatched are processed after it.
func TestRecoveryAfterRestart(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "It is {{last_result}}."},
	}})
	th := e.newThread()
	// Write a queued message straight into the store while the runtime is
	// down, as a crash right after accepting it would leave it.
	e.stop()
	e.offline(func(tx store.Tx) error {
		p, _ := json.Marshal(store.UserMessage{Text: "time?"})
		_, err := tx.Enqueue(store.InboxItem{ThreadID: th, Kind: store.KindUserMessage, Payload: p, DedupKey: "user:crash"})
		return err
	})
	e.start()
	inv := ts.next()
	reply(t, inv, "noon")
	e.waitHistory(th, "answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "It is noon.") })
	e.idle(th)
	// A call persisted in state "new" (a crash between commit and dispatch)
	// is dispatched by Start.
	e.stop()
	e.offline(func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{{ThreadID: th, CallID: "call_crash", ToolName: "get_time", Arguments: json.RawMessage(`{}`),
			Toolset: "clock", Endpoint: ts.URL() + "/invoke", TurnSeq: 4, State: store.CallNew}})
	})
	e.start()
	if inv := ts.next(); inv.ID != "call_crash" {
		t.Fatalf("dispatched %q after restart, want call_crash", inv.ID)
	}
}

// A real tool server built with the rap SDK.
func TestWithSDKToolServer(t *testing.T) {
	srv := rap.NewServer("greeter", nil)
	type in struct {
		Name string `json:"name"`
	}
	rap.AddTool(srv, &rap.Tool{Name: "greet", Description: "greets someone"}, func(ctx context.Context, c *rap.Call, a in) (*rap.Reply, error) {
		return rap.Text("hello, " + a.Name), nil
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(t, srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		srv.Shutdown(ctx)
	})
	e := newEnv(t, envOptions{servers: []string{hs}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("greet", `{"name":"Ada"}`)}},
		{Text: "{{last_result}}"},
	}})
	th := e.newThread()
	e.post(th, "greet Ada")
	e.waitHistory(th, "the greeting", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "hello, Ada") })
}

// RAP IN-1, IN-2: an invocation from a child thread carries
// thread_ancestors from the root to the parent, and uses its session's
// (the root's) toolsets.
func TestIN2ThreadAncestorsForChildThreads(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "done"},
	}})
	root := e.newThread()
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "child", ParentID: root}); err != nil {
			return err
		}
		return tx.CreateThread(store.Thread{ID: "grandchild", ParentID: "child"})
	})
	if err != nil {
		t.Fatal(err)
	}
	e.post("grandchild", "time?")
	inv := ts.next()
	if inv.GroupID != "grandchild" || fmt.Sprint(inv.ThreadAncestors) != fmt.Sprint([]string{root, "child"}) {
		t.Fatalf("group_id %q, thread_ancestors %v; want grandchild, [%s child]", inv.GroupID, inv.ThreadAncestors, root)
	}
	reply(t, inv, "noon")
	e.waitHistory("grandchild", "answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "done") })
	if h := e.history(root); len(h) != 0 {
		t.Fatalf("the root thread's history changed: %s", dump(h))
	}
}

// RAP DS-2: the display hook renders calls for people; when it fails
// (here, it panics) the call shows as name(args) and nothing else changes.
func TestDisplayHook(t *testing.T) {
	ts := newToolServer(t, "echo", echoTool())
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{AfterUser: "one", ToolCalls: []scripted.Call{call("echo", `{"text":"hi"}`)}},
		{AfterUser: "two", ToolCalls: []scripted.Call{call("echo", `{"text":"boom"}`)}},
		{Text: "ok", Repeat: true},
	}, tweak: func(c *Config) {
		c.DisplayText = func(name, script string, args json.RawMessage) string {
			if strings.Contains(string(args), "boom") {
				panic("display failure")
			}
			return "Echo: " + string(args)
		}
	}})
	th := e.newThread()
	e.post(th, "one")
	reply(t, ts.next(), "hi")
	e.waitHistory(th, "first answer", func(h []store.Message) bool { return len(h) == 4 })
	e.post(th, "two")
	reply(t, ts.next(), "boom")
	h := e.waitHistory(th, "second answer", func(h []store.Message) bool { return len(h) == 8 })
	cs := calls(h)
	if cs[0].Display != `Echo: {"text":"hi"}` || cs[1].Display != `echo({"text":"boom"})` {
		t.Fatalf("displays = %q, %q", cs[0].Display, cs[1].Display)
	}
}

// Under concurrent load every accepted message appears exactly once, in
// the order it was accepted, and no thread's completions overlap (RAP RT-2).
func TestConcurrentMessagesExactlyOnce(t *testing.T) {
	g := &gate{inner: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), active: map[string]int{}}
	e := newEnv(t, envOptions{model: g})
	const threads, perThread = 4, 15
	ids := make([]string, threads)
	for i := range ids {
		ids[i] = e.newThread()
	}
	var wg sync.WaitGroup
	for i, th := range ids {
		wg.Go(func() {
			for j := 0; j < perThread; j++ {
				if err := e.rt.PostMessage(context.Background(), th, fmt.Sprintf("t%d-m%02d", i, j)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i, th := range ids {
		e.idle(th)
		var got []string
		for _, m := range e.history(th) {
			if m.Role == store.RoleUser {
				got = append(got, m.Text)
			}
		}
		if len(got) != perThread {
			t.Fatalf("thread %d has %d user messages, want %d: %v", i, len(got), perThread, got)
		}
		for j, text := range got {
			if want := fmt.Sprintf("t%d-m%02d", i, j); text != want {
				t.Fatalf("thread %d message %d = %q, want %q", i, j, text, want)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.overlap) > 0 {
		t.Fatalf("completions overlapped within a thread: %v", g.overlap)
	}
}
