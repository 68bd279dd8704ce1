package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

func countResults(h []store.Message, sub string) int {
	n := 0
	for _, r := range results(h) {
		if strings.Contains(r.Text, sub) {
			n++
		}
	}
	return n
}

func countAssistant(h []store.Message, sub string) int {
	n := 0
	for _, m := range h {
		if m.Role == store.RoleAssistant && strings.Contains(m.Text, sub) {
			n++
		}
	}
	return n
}

// RAP BT-1: a sleep is a durable timer. A runtime restarted before the
// due time still wakes the thread, exactly once, and not before it is due.
func TestBT1SleepWakesOnceAcrossRestart(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{
		{AfterUser: "nap", Text: "sleeping", ToolCalls: []scripted.Call{call(BuiltinSleep, `{"seconds": 3, "reason": "test"}`)}},
		{When: &scripted.When{LastResultContains: "Woke up"}, Text: "rested"},
		{Text: "?", Repeat: true},
	}})
	th := e.newThread()
	start := time.Now()
	e.post(th, "nap")
	e.idle(th)
	e.stop()
	var timers []store.Timer
	e.offline(func(tx store.Tx) error {
		var err error
		timers, err = tx.DueTimers(time.Now().Add(time.Hour))
		return err
	})
	if len(timers) != 1 || timers[0].ThreadID != th {
		t.Fatalf("timers at restart = %+v, want the sleep's", timers)
	}
	e.start()
	e.waitHistory(th, "the wake-up", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "rested") })
	if d := time.Since(start); d < 3*time.Second {
		t.Fatalf("woke after %v, before the 3 s sleep ended", d)
	}
	// Another restart must not deliver it again.
	e.restart()
	time.Sleep(200 * time.Millisecond)
	e.idle(th)
	h := e.history(th)
	if countResults(h, "Woke up") != 1 || countAssistant(h, "rested") != 1 {
		t.Fatalf("the sleep woke the thread %d times, want once:\n%s", countResults(h, "Woke up"), dump(h))
	}
}

// RAP BT-1: sleep_until with a past time wakes at once; a bad time zone
// is an error result that loops back into the completion within the same
// slice (RAP BT-7); sleep_until_event_or_input ends the slice and
// schedules nothing.
func TestBT1SleepUntilAndWaitForInput(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{
		{AfterUser: "past", ToolCalls: []scripted.Call{call(BuiltinSleepUntil, `{"date":"2020-01-01","time":"09:30","timezone":"Europe/Paris"}`)}},
		{When: &scripted.When{LastResultContains: "Woke up"}, Text: "it was in the past"},
		{AfterUser: "mars", ToolCalls: []scripted.Call{call(BuiltinSleepUntil, `{"date":"2030-01-01","time":"09:30","timezone":"Mars/Olympus"}`)}},
		{When: &scripted.When{LastResultContains: "IANA"}, Text: "bad zone"},
		{AfterUser: "wait", ToolCalls: []scripted.Call{call(BuiltinSleepUntilEventOrUser, `{}`)}},
		{Text: "looped", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "past")
	e.waitHistory(th, "the wake-up", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "it was in the past") })
	e.idle(th)
	n := len(e.model.requests())
	e.post(th, "mars")
	e.waitHistory(th, "the error", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "bad zone") })
	e.idle(th)
	if got := len(e.model.requests()) - n; got != 2 {
		t.Fatalf("%d completions for the bad call, want 2 in one slice (RAP BT-7)", got)
	}
	n = len(e.model.requests())
	e.post(th, "wait")
	e.idle(th)
	h := e.history(th)
	if got := len(e.model.requests()) - n; got != 1 || hasText(h, store.RoleAssistant, "looped") {
		t.Fatalf("sleep_until_event_or_input ran %d completions, want 1 and the slice ended", got)
	}
	if countResults(h, "Waiting for the next user message") != 1 {
		t.Fatalf("history:\n%s", dump(h))
	}
	var next bool
	e.st.View(context.Background(), func(tx store.Tx) error {
		_, next, _ = tx.NextTimer()
		return nil
	})
	if next {
		t.Fatal("a timer is left after the sleeps ended")
	}
}

// RAP SU-5: the reserved name is never offered to the model, even when a
// toolset defines it, and a call to it gets an error result at once.
func TestSU5ReservedNameNeverOfferedAndRejected(t *testing.T) {
	ts := newToolServer(t, "sneaky", tool(InjectedToolName), tool("fine"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{AfterUser: "go", Text: "trying", ToolCalls: []scripted.Call{call(InjectedToolName, `{}`)}},
		{When: &scripted.When{LastResultContains: "reserved"}, Text: "understood"},
	}})
	th := e.newThread()
	e.post(th, "go")
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "understood") })
	for _, req := range e.model.requests() {
		for _, tl := range req.Tools {
			if tl.Name == InjectedToolName {
				t.Fatalf("the reserved tool was offered: %s", fmtReqTools(req))
			}
		}
		if !slices.ContainsFunc(req.Tools, func(s model.ToolSpec) bool { return s.Name == "fine" }) {
			t.Fatalf("the toolset's other tool is missing: %s", fmtReqTools(req))
		}
	}
	if len(ts.invocations()) != 0 {
		t.Fatalf("the reserved call was dispatched: %+v", ts.invocations())
	}
}

// RAP BT-2, BT-3, BT-4: spawn_thread is synchronous and checks child_of;
// the child inherits the history up to its spawn point and never sees the
// parent's later messages; its report reaches the parent as a synthetic
// call tied to the spawn_thread call; close_thread closes it. The tree is
// visible in the client API.
func TestBT2SpawnThreadReportAndClose(t *testing.T) {
	var root string
	var mu sync.Mutex
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		mu.Lock()
		rootID := root
		mu.Unlock()
		var own, stack string
		for _, msg := range req.Messages {
			for _, r := range msg.ToolResults {
				if s := spawnedRe.FindStringSubmatch(r.Text); s != nil {
					own, stack = s[1], s[2]
				}
			}
		}
		switch {
		case strings.Contains(in.user, "split the work"):
			return &model.Response{Text: "spawning", ToolCalls: []model.ToolCall{toolCall(BuiltinSpawnThread,
				map[string]any{"instructions": "count the words", "child_of": []string{rootID}})}}
		case in.resultName == BuiltinSpawnThread && strings.Contains(in.result, "Child thread spawned"):
			return &model.Response{Text: "the child is working"}
		case in.resultName == BuiltinSpawnThread && own != "" && strings.Contains(in.result, "You are now inside"):
			// A child that repeats its parent's plan is stopped by child_of.
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSpawnThread,
				map[string]any{"instructions": "count the words", "child_of": []string{rootID}})}}
		case in.resultName == BuiltinSpawnThread && strings.Contains(in.result, "child_of must be"):
			if stack != fmt.Sprintf("[%q,%q]", rootID, own) {
				return &model.Response{Text: "bad stack " + stack}
			}
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinReportToParent, map[string]string{"report": "there are 42 words"})}}
		case in.resultName == BuiltinReportToParent:
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinCloseThread, map[string]string{"thread_id": own})}}
		case in.resultName == InjectedToolName:
			return &model.Response{Text: "the child reported"}
		case strings.Contains(in.user, "later"):
			return &model.Response{Text: "a later answer"}
		}
		return &model.Response{Text: "unexpected"}
	}}
	e := newEnv(t, envOptions{model: m})
	mu.Lock()
	root = e.newThread()
	mu.Unlock()
	events, cancel := e.rt.Subscribe(root)
	defer cancel()
	e.post(root, "split the work")
	h := e.waitHistory(root, "the report", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "the child reported") })
	ev := waitEvent(t, events, EventThreadSpawned)
	kids := e.children(root)
	if len(kids) != 1 {
		t.Fatalf("%d children, want 1", len(kids))
	}
	child := kids[0]
	if !strings.Contains(string(ev.Data), child.ID) {
		t.Fatalf("thread_spawned event %s does not name the child %s", ev.Data, child.ID)
	}
	poll(t, "the child to close", func() bool { return e.thread(child.ID).Status == store.ThreadClosed })
	// The child's shutdown notice reaches the parent after the close; wait
	// for it before the next message, or both can arrive in one batch and
	// the model answers the notice instead of the message.
	e.waitHistory(root, "the shutdown notice", func(h []store.Message) bool { _, ir := injected(h); return len(ir) == 2 })
	e.post(root, "later, tell me more")
	e.waitHistory(root, "the later answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "a later answer") })

	// The report is tied to the spawn_thread call (RAP BT-3).
	var spawnID string
	for _, c := range calls(h) {
		if c.Name == BuiltinSpawnThread {
			spawnID = c.ID
		}
	}
	// The child reported, then closed without a final report: the parent
	// hears it shut down too.
	h = e.waitHistory(root, "the shutdown notice", func(h []store.Message) bool { _, ir := injected(h); return len(ir) == 2 })
	ic, ir := injected(h)
	if len(ir) != 2 || !strings.Contains(ir[0].Text, "there are 42 words") || !strings.Contains(ir[1].Text, "has shut down without a report") ||
		!strings.Contains(string(ic[0].Arguments), `"original_tool_name":"spawn_thread"`) ||
		!strings.Contains(string(ic[0].Arguments), `"original_tool_call_id":"`+spawnID+`"`) {
		t.Fatalf("report in the parent: %+v %+v", ic, ir)
	}
	ch := e.history(child.ID)
	if ch[0].Text != "split the work" || strings.Contains(dump(ch), "later, tell me more") {
		t.Fatalf("child history must start with the parent's and stop at the spawn point:\n%s", dump(ch))
	}
	if countResults(ch, "child_of must be") != 1 || len(e.children(child.ID)) != 0 {
		t.Fatalf("the child's wrong spawn_thread was not refused (RAP BT-2):\n%s", dump(ch))
	}
	if child.OriginCallID != spawnID || child.RootID != root {
		t.Fatalf("child = %+v", child)
	}

	// The tree in the client API.
	resp, err := http.Get(e.srv.URL + "/v1/threads")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Threads []store.Thread }
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if !slices.ContainsFunc(list.Threads, func(th store.Thread) bool {
		return th.ID == child.ID && th.ParentID == root && th.Status == store.ThreadClosed
	}) {
		t.Fatalf("GET /v1/threads = %+v: the child with its parent_id is missing", list.Threads)
	}
	resp, err = http.Get(e.srv.URL + "/v1/threads/" + root)
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Children []string }
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if fmt.Sprint(info.Children) != "["+child.ID+"]" {
		t.Fatalf("children = %v", info.Children)
	}
	resp, err = http.Get(e.srv.URL + "/v1/threads/" + child.ID + "/messages")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the child's history is not reachable: %v %v", resp.Status, err)
	}
	resp.Body.Close()
}

// RAP BT-5: send_message_to_child wakes a direct child with the message;
// any other thread is refused.
func TestBT5SendMessageToChild(t *testing.T) {
	var mu sync.Mutex
	var root, child string
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(in.user, "spawn"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSpawnThread, map[string]any{"instructions": "wait for orders", "child_of": []string{root}})}}
		case strings.Contains(in.user, "tell the child"):
			return &model.Response{ToolCalls: []model.ToolCall{
				toolCall(BuiltinSendMessageToChild, map[string]string{"thread_id": root, "message": "to myself"}),
				toolCall(BuiltinSendMessageToChild, map[string]string{"thread_id": child, "message": "start now"})}}
		case strings.Contains(in.user, "[message from the parent thread"):
			return &model.Response{Text: "child starting: " + in.user}
		case in.resultName == BuiltinSendMessageToChild:
			return &model.Response{Text: "sent"}
		}
		return &model.Response{Text: "idle"}
	}}
	e := newEnv(t, envOptions{model: m})
	mu.Lock()
	root = e.newThread()
	mu.Unlock()
	e.post(root, "spawn")
	poll(t, "the child", func() bool { return len(e.children(root)) == 1 })
	mu.Lock()
	child = e.children(root)[0].ID
	mu.Unlock()
	e.idle(child)
	e.post(root, "tell the child")
	ch := e.waitHistory(child, "the child's answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "child starting") })
	if !hasText(ch, store.RoleAssistant, "start now") {
		t.Fatalf("child history:\n%s", dump(ch))
	}
	h := e.waitHistory(root, "sent", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "sent") })
	if countResults(h, "is not a direct child") != 1 {
		t.Fatalf("sending to a non-child was not refused:\n%s", dump(h))
	}
}

// RAP SU-7, BT-6: cancel_subscription needs an active subscription of the
// thread (else an error result, looped back in the same slice), notifies
// every tool server with /cancel_tool_call and stops tracking it: later
// events are discarded.
func TestSU7CancelSubscription(t *testing.T) {
	ts := newToolServer(t, "feed", tool("watch"))
	cancels := make(chan rap.CancelToolCallRequest, 10)
	ts.onOther = func(r *http.Request, body []byte) {
		if req, err := rap.DecodeCancelToolCall(body); err == nil && r.URL.Path == rap.CancelToolCallPath {
			cancels <- *req
		}
	}
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		var subID string
		for _, msg := range req.Messages {
			for _, c := range msg.ToolCalls {
				if c.Name == "watch" {
					subID = c.ID
				}
			}
		}
		switch {
		case strings.Contains(in.user, "watch"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall("watch", map[string]any{})}}
		case strings.Contains(in.user, "stop"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinCancelSubscription, map[string]string{"tool_call_id": "no-such-call"})}}
		case in.resultName == BuiltinCancelSubscription && strings.Contains(in.result, "not an active subscription"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinCancelSubscription, map[string]string{"tool_call_id": subID})}}
		case in.resultName == BuiltinCancelSubscription:
			return &model.Response{Text: "stopped"}
		}
		return &model.Response{Text: "ok"}
	}}
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, model: m})
	th := e.newThread()
	e.post(th, "watch the feed")
	inv := ts.next()
	if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "subscribed", Subscription: true}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	e.waitHistory(th, "confirmation", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "ok") })
	e.idle(th)
	n := m.n.Load()
	e.post(th, "stop it")
	h := e.waitHistory(th, "stopped", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "stopped") })
	if got := m.n.Load() - n; got != 3 {
		t.Fatalf("%d completions, want 3 in one slice (RAP BT-7)", got)
	}
	if countResults(h, "not an active subscription") != 1 || countResults(h, "is cancelled") != 1 {
		t.Fatalf("history:\n%s", dump(h))
	}
	select {
	case req := <-cancels:
		if req.ThreadID != th || req.ToolCallID != inv.ID {
			t.Fatalf("cancel_tool_call = %+v", req)
		}
	case <-time.After(waitFor):
		t.Fatal("no /cancel_tool_call (RAP SU-7, CA-1)")
	}
	e.idle(th)
	before := len(e.history(th))
	status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "late", Associative: true})
	// 410 Gone tells the tool to stop the subscription.
	if status != http.StatusGone || !strings.Contains(body, "cancelled") {
		t.Fatalf("event after cancel: %d %s", status, body)
	}
	if status, _ := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "late2"}); status != http.StatusGone {
		t.Fatal(status)
	}
	e.idle(th)
	if len(e.history(th)) != before || len(e.children(th)) != 0 {
		t.Fatalf("an event of a cancelled subscription was processed")
	}
}

// RAP SU-8: a thread has a bounded number of active subscriptions; one
// more is cancelled at the tool and the model gets an error result.
func TestSU8SubscriptionLimit(t *testing.T) {
	ts := newToolServer(t, "feed", tool("watch"))
	cancels := make(chan rap.CancelToolCallRequest, 10)
	ts.onOther = func(r *http.Request, body []byte) {
		if req, err := rap.DecodeCancelToolCall(body); err == nil {
			cancels <- *req
		}
	}
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, tweak: func(c *Config) { c.MaxSubscriptionsPerThread = 1 },
		turns: []scripted.Turn{
			{AfterUser: "two", ToolCalls: []scripted.Call{call("watch", `{}`), call("watch", `{}`)}},
			{Text: "done", Repeat: true},
		}})
	th := e.newThread()
	e.post(th, "two feeds")
	a, b := ts.next(), ts.next()
	for _, inv := range []rap.Invocation{a, b} {
		if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "subscribed", Subscription: true}); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	h := e.waitHistory(th, "done", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "done") })
	if countResults(h, "already has 1 active subscriptions") != 1 {
		t.Fatalf("history:\n%s", dump(h))
	}
	select {
	case req := <-cancels:
		if req.ToolCallID != b.ID {
			t.Fatalf("cancelled %s, want the second subscription %s", req.ToolCallID, b.ID)
		}
	case <-time.After(waitFor):
		t.Fatal("the refused subscription was not cancelled at the tool")
	}
	var active int
	e.st.View(context.Background(), func(tx store.Tx) error {
		active, _ = countActiveSubscriptions(tx, th)
		return nil
	})
	if active != 1 {
		t.Fatalf("%d active subscriptions, want 1", active)
	}
}

// RAP SU-9, TC-1: events for a closed thread are logged and discarded;
// closing a thread sends /close_thread to every configured tool server,
// and one failing server does not stop the others.
func TestSU9ClosedThreadAndTC1(t *testing.T) {
	ok := newToolServer(t, "feed", tool("watch"))
	closed := make(chan string, 10)
	ok.onOther = func(r *http.Request, body []byte) {
		if req, err := rap.DecodeCloseThread(body); err == nil && r.URL.Path == rap.CloseThreadPath {
			closed <- req.ThreadID
		}
	}
	failing := make(chan string, 10)
	bad := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == rap.CloseThreadPath {
			failing <- r.URL.Path
		}
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	e := newEnv(t, envOptions{servers: []string{bad, ok.URL()}, turns: []scripted.Turn{
		{AfterUser: "watch", ToolCalls: []scripted.Call{call("watch", `{}`)}},
		{Text: "ok", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "watch")
	inv := ok.next()
	callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "subscribed", Subscription: true})
	e.waitHistory(th, "ok", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "ok") })
	e.idle(th)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/threads/"+th+"/close", nil)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("close: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case <-failing:
	case <-time.After(waitFor):
		t.Fatal("the failing tool server did not get /close_thread (RAP TC-1)")
	}
	select {
	case got := <-closed:
		if got != th {
			t.Fatalf("close_thread for %q, want %q", got, th)
		}
	case <-time.After(waitFor):
		t.Fatal("the second tool server did not get /close_thread (RAP TC-1)")
	}
	before := len(e.history(th))
	status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "orphan"})
	if status != http.StatusGone || !strings.Contains(body, "closed") {
		t.Fatalf("event for a closed thread: %d %s", status, body)
	}
	e.idle(th)
	if len(e.history(th)) != before || len(e.children(th)) != 0 {
		t.Fatal("an event for a closed thread was processed (RAP SU-9)")
	}
	if len(e.logs.records("subscription event discarded: the thread is closed (RAP SU-9)")) != 1 {
		t.Fatalf("the discarded event was not logged")
	}
	if err := e.rt.PostMessage(context.Background(), th, "hello?"); err == nil {
		t.Fatal("a closed thread accepted a message")
	}
}

// The system prompt names the thread and its stack, so a model (here the
// scripted one, through "{{thread_stack}}" and "{{thread_id}}") can give
// spawn_thread's child_of and close_thread's thread_id (RAP BT-2, BT-4).
func TestScriptedSpawnAndCloseWithThreadLine(t *testing.T) {
	e := newEnv(t, envOptions{tweak: func(c *Config) { c.System = "Be brief." }, turns: []scripted.Turn{
		{AfterUser: "split", ToolCalls: []scripted.Call{call(BuiltinSpawnThread, `{"instructions": "count the words", "child_of": "{{thread_stack}}"}`)}},
		{When: &scripted.When{LastResultContains: "Child thread spawned"}, Text: "child started"},
		{When: &scripted.When{LastResultContains: "You are now inside"}, ToolCalls: []scripted.Call{call(BuiltinCloseThread, `{"thread_id": "{{thread_id}}", "report_to_parent": "42 words"}`)}},
		{When: &scripted.When{LastResultContains: "42 words"}, Text: "the child counted 42 words"},
	}})
	root := e.newThread()
	e.post(root, "split the work")
	e.waitHistory(root, "the report", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "the child counted 42 words") })
	kids := e.children(root)
	if len(kids) != 1 {
		t.Fatalf("%d children", len(kids))
	}
	poll(t, "the child to close", func() bool { return e.thread(kids[0].ID).Status == store.ThreadClosed })
	req := e.model.requests()[0]
	if !strings.HasPrefix(req.System, "Be brief.\n\n"+ThreadLinePrefix+root+". ") {
		t.Fatalf("system prompt = %q", req.System)
	}
}
