package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/store"
)

// resultFor returns the text of the result of callID in a request, and
// whether there is one.
func resultFor(req model.Request, callID string) (string, bool) {
	for _, m := range req.Messages {
		for _, r := range m.ToolResults {
			if r.CallID == callID {
				return r.PlainText(), true
			}
		}
	}
	return "", false
}

// requestWith returns the last recorded request whose conversation
// contains sub.
func requestWith(reqs []model.Request, sub string) (model.Request, bool) {
	for i := len(reqs) - 1; i >= 0; i-- {
		b, _ := json.Marshal(reqs[i].Messages)
		if strings.Contains(string(b), sub) {
			return reqs[i], true
		}
	}
	return model.Request{}, false
}

// RAP SU-6, BT-2: a child thread inherits its parent's
// history, including the parent's calls still waiting for their result.
// The child's model must not be told that result will arrive: it goes to
// the parent. The request the child's model sees says so, for a child made
// for a subscription event and for a spawn_thread child.
func TestChildIsNotPromisedParentResults(t *testing.T) {
	src := newEventSource(t, "feed")
	slow := newToolServer(t, "slow", tool("slow_job"))
	var mu sync.Mutex
	var root string
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		mu.Lock()
		rootID := root
		mu.Unlock()
		switch {
		case eventThreadRe.MatchString(in.user):
			id := eventThreadRe.FindStringSubmatch(in.user)[1]
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinCloseThread, map[string]string{"thread_id": id})}}
		case in.resultName == BuiltinSpawnThread && strings.Contains(in.result, "You are now inside"):
			return &model.Response{Text: "child here"}
		case strings.HasPrefix(in.user, "subscribe"):
			// The subscription and a slow job in one turn: the job's
			// result is still missing when the event's child starts.
			return &model.Response{ToolCalls: []model.ToolCall{
				toolCall("watch_feed", map[string]string{"topic": "news"}), toolCall("slow_job", map[string]any{})}}
		case strings.HasPrefix(in.user, "spawn"):
			return &model.Response{ToolCalls: []model.ToolCall{
				toolCall("slow_job", map[string]any{}),
				toolCall(BuiltinSpawnThread, map[string]any{"instructions": "say hello", "child_of": []string{rootID}})}}
		}
		return &model.Response{Text: "ok"}
	}}
	e := newEnv(t, envOptions{servers: []string{src.url, slow.URL()}, model: m})
	mu.Lock()
	root = e.newThread()
	mu.Unlock()

	// A child made for a subscription event.
	e.post(root, "subscribe to the news")
	slowCall := slow.next()
	poll(t, "an active subscription", func() bool {
		var subs []store.Subscription
		e.st.View(context.Background(), func(tx store.Tx) error {
			var err error
			subs, err = tx.ThreadSubscriptions(root)
			return err
		})
		return len(subs) == 1 && subs[0].State == store.SubscriptionActive
	})
	src.push("news", sourceEvent{text: "HEADLINE"})
	poll(t, "the event's child to close", func() bool {
		kids := e.children(root)
		return len(kids) == 1 && e.thread(kids[0].ID).Status == store.ThreadClosed
	})
	req, ok := requestWith(e.model.requests(), "HEADLINE")
	if !ok {
		t.Fatal("no request of the event's child was recorded")
	}
	got, ok := resultFor(req, slowCall.ID)
	if !ok {
		t.Fatalf("the child's request has no result for the inherited call %s", slowCall.ID)
	}
	if got != inheritedCallText(root) || strings.Contains(got, pendingResultText) {
		t.Fatalf("the event child's placeholder for its parent's call %s is %q; want %q", slowCall.ID, got, inheritedCallText(root))
	}
	// The parent itself still waits for its own call.
	reply(t, slowCall, "job done")
	e.waitHistory(root, "the job's result", func(h []store.Message) bool {
		return countResults(h, "job done") == 1
	})

	// A child made by spawn_thread, next to a slow call of the same turn.
	e.post(root, "spawn a helper")
	spawnSlow := slow.next()
	var child store.Thread
	poll(t, "the spawned child to answer", func() bool {
		for _, k := range e.children(root) {
			if k.OriginTool == BuiltinSpawnThread {
				child = k
				return hasText(e.history(k.ID), store.RoleAssistant, "child here")
			}
		}
		return false
	})
	req, ok = requestWith(e.model.requests(), "You are now inside")
	if !ok {
		t.Fatal("no request of the spawned child was recorded")
	}
	if got, _ := resultFor(req, spawnSlow.ID); got != inheritedCallText(root) {
		t.Fatalf("the spawned child %s sees %q for its parent's pending call; want %q", child.ID, got, inheritedCallText(root))
	}
}

// A spawned child that closes without a report, by
// close_thread or through the client API, tells its parent it has shut
// down (as an event tied to the spawn_thread call, RAP BT-3); a parent that
// closes its child itself gets no notice; the model cannot close the root
// thread with close_thread (RAP BT-4).
func TestSpawnedChildShutdownAndRootClose(t *testing.T) {
	var mu sync.Mutex
	var root string
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		mu.Lock()
		rootID := root
		mu.Unlock()
		if in.resultName == BuiltinSpawnThread && strings.Contains(in.result, "You are now inside") {
			own := spawnedRe.FindStringSubmatch(in.result)[1]
			var instructions string
			for _, msg := range req.Messages {
				for _, c := range msg.ToolCalls {
					if c.Name == BuiltinSpawnThread {
						instructions = string(c.Arguments)
					}
				}
			}
			if strings.Contains(instructions, "quiet") {
				return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinCloseThread, map[string]string{"thread_id": own})}}
			}
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSleepUntilEventOrUser, map[string]any{})}}
		}
		switch {
		case strings.HasPrefix(in.user, "spawn"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSpawnThread,
				map[string]any{"instructions": strings.TrimPrefix(in.user, "spawn "), "child_of": []string{rootID}})}}
		case strings.HasPrefix(in.user, "close yourself"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinCloseThread, map[string]string{"thread_id": rootID})}}
		case in.resultName == InjectedToolName:
			return &model.Response{Text: "noted"}
		}
		return nil
	}}
	e := newEnv(t, envOptions{model: m})
	mu.Lock()
	root = e.newThread()
	mu.Unlock()
	shutdowns := func() []store.ToolResult {
		var out []store.ToolResult
		_, res := injected(e.history(root))
		for _, r := range res {
			if strings.Contains(r.Text, "has shut down without a report") {
				out = append(out, r)
			}
		}
		return out
	}

	// The child closes itself without report_to_parent.
	e.post(root, "spawn quiet")
	poll(t, "the shutdown notice of the quiet child", func() bool { return len(shutdowns()) == 1 })
	kids := e.children(root)
	if len(kids) != 1 || !strings.Contains(shutdowns()[0].Text, kids[0].ID) {
		t.Fatalf("notice %+v does not name the child %+v", shutdowns(), kids)
	}
	ic, _ := injected(e.history(root))
	if !strings.Contains(string(ic[0].Arguments), `"original_tool_call_id":"`+kids[0].OriginCallID+`"`) {
		t.Fatalf("the notice is not tied to the spawn_thread call %s: %s", kids[0].OriginCallID, ic[0].Arguments)
	}

	// The client closes a waiting child.
	e.post(root, "spawn waiter")
	var waiter store.Thread
	poll(t, "the waiting child", func() bool {
		for _, k := range e.children(root) {
			if k.ID != kids[0].ID {
				waiter = k
				return countResults(e.history(k.ID), "Waiting for the next user message") == 1
			}
		}
		return false
	})
	if err := e.rt.CloseThread(context.Background(), waiter.ID); err != nil {
		t.Fatal(err)
	}
	poll(t, "the shutdown notice of the closed child", func() bool { return len(shutdowns()) == 2 })
	if !strings.Contains(shutdowns()[1].Text, waiter.ID) {
		t.Fatalf("second notice %q does not name %s", shutdowns()[1].Text, waiter.ID)
	}
	e.idle(root)

	// The model cannot close the root thread.
	e.post(root, "close yourself")
	e.idle(root)
	h := e.history(root)
	if countResults(h, "root threads are closed by the user") != 1 {
		t.Fatalf("close_thread on the root was not refused:\n%s", dump(h))
	}
	if e.thread(root).Status != store.ThreadActive {
		t.Fatalf("the root thread was closed by the model")
	}
}
