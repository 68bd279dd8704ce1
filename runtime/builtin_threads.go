package runtime

// This file owns the built-ins that work on threads (RAP BT-2 to BT-5):
// spawn_thread, report_to_parent, close_thread and send_message_to_child,
// one function each; the thread machinery they use is in children.go and
// close.go.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// execSpawnThread runs spawn_thread (RAP BT-2): a child thread that
// inherits this thread's history (children.go), seeded and woken.
func (r *Runtime) execSpawnThread(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (store.ToolResult, bool, error) {
	res, fail, done := builtinReply(c)
	var a struct {
		Instructions string   `json:"instructions"`
		ChildOf      []string `json:"child_of"`
	}
	if err := decodeStrict(c.Arguments, &a); err != nil {
		return fail("arguments are not {\"instructions\": string, \"child_of\": [string]}: %v", err)
	}
	if strings.TrimSpace(a.Instructions) == "" {
		return fail("instructions is empty; say what the child thread should do")
	}
	stack, err := threadStack(tx, th)
	if err != nil {
		return res, false, err
	}
	if !slices.Equal(stack, a.ChildOf) {
		// RAP BT-2: a child that inherited its parent's plans must not
		// carry them out again.
		return fail("child_of must be your own thread stack %s, got %s. You are thread %s: if you are a child thread, work on your own task instead of repeating your parent's plans",
			jsonString(stack), jsonString(a.ChildOf), th.ID)
	}
	child := store.Thread{ID: store.NewThreadID(), ParentID: th.ID, RootID: th.RootID, Status: store.ThreadActive,
		OriginCallID: c.ID, OriginTool: c.Name, OriginArgs: c.Arguments}
	if err := r.createChild(tx, child, th.ID); err != nil {
		return res, false, err
	}
	seed := store.Message{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: c.ID, Name: c.Name,
		Text: fmt.Sprintf("You are now inside the spawned thread. Follow the instructions of the spawn_thread call above. Your thread id is %s and your thread stack is %s. "+
			"Report what you find with report_to_parent, and call close_thread with your thread id when you are done.", child.ID, jsonString(append(stack, child.ID)))}}}
	if _, err := tx.AppendMessages(child.ID, []store.Message{seed}); err != nil {
		return res, false, err
	}
	if _, err := tx.Enqueue(store.InboxItem{ThreadID: child.ID, Kind: store.KindWake, Payload: json.RawMessage(`{"reason":"spawned"}`),
		DedupKey: "wake:" + child.ID}); err != nil {
		return res, false, err
	}
	fx.wake = append(fx.wake, child.ID)
	fx.event(th.ID, EventThreadSpawned, api.ThreadSpawned{ThreadID: child.ID, ParentID: th.ID, OriginCallID: c.ID, OriginTool: c.Name, Reason: api.SpawnThread})
	return done(fmt.Sprintf("Child thread spawned with id %s. It runs on its own and reports back; go on with your own work.", child.ID))
}

// execReportToParent runs report_to_parent (RAP BT-3): a report in the
// parent's inbox.
func (r *Runtime) execReportToParent(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (store.ToolResult, bool, error) {
	res, fail, done := builtinReply(c)
	var a struct {
		Report string `json:"report"`
	}
	if err := decodeStrict(c.Arguments, &a); err != nil {
		return fail("arguments are not {\"report\": string}: %v", err)
	}
	if strings.TrimSpace(a.Report) == "" || len(a.Report) > maxBuiltinText {
		return fail("report must be 1 to %d bytes of text", maxBuiltinText)
	}
	if th.ParentID == "" {
		return fail("this is a root thread and has no parent; answer the user directly")
	}
	sent, err := r.report(tx, th, c.ID, a.Report, false, fx)
	if err != nil {
		return res, false, err
	}
	if !sent {
		return fail("the parent thread %s is closed; the report was not delivered", th.ParentID)
	}
	return done("Report sent to the parent thread.")
}

// execCloseThread runs close_thread (RAP BT-4): it closes this thread or a
// direct child (close.go), with an optional last report to its parent.
func (r *Runtime) execCloseThread(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (store.ToolResult, bool, error) {
	res, fail, done := builtinReply(c)
	var a struct {
		ThreadID       string  `json:"thread_id"`
		ReportToParent *string `json:"report_to_parent"`
	}
	if err := decodeStrict(c.Arguments, &a); err != nil {
		return fail("arguments are not {\"thread_id\": string, \"report_to_parent\"?: string}: %v", err)
	}
	target := th
	if a.ThreadID != th.ID {
		t, err := tx.Thread(a.ThreadID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && t.ParentID != th.ID) {
			return fail("thread %q is neither this thread (%s) nor one of its direct children", a.ThreadID, th.ID)
		}
		if err != nil {
			return res, false, err
		}
		target = t
	}
	if target.ParentID == "" {
		// The conversation the user started is theirs
		// to end.
		return fail("thread %s is the root thread; root threads are closed by the user (through the client API), not with close_thread. "+
			"To end your turn, answer the user; to wait, call %s", target.ID, BuiltinSleepUntilEventOrUser)
	}
	if target.Status == store.ThreadClosed {
		return done(fmt.Sprintf("Thread %s was already closed.", target.ID))
	}
	reported := false
	if a.ReportToParent != nil && strings.TrimSpace(*a.ReportToParent) != "" {
		if len(*a.ReportToParent) > maxBuiltinText {
			return fail("report_to_parent is longer than %d bytes", maxBuiltinText)
		}
		if _, err := r.report(tx, target, c.ID, *a.ReportToParent, true, fx); err != nil {
			return res, false, err
		}
		reported = true
	}
	if err := r.closeThreadTx(tx, target, fx); err != nil {
		return res, false, err
	}
	if !reported && target.ID == th.ID {
		// A parent that closes its child knows; a child that closes
		// itself tells its parent.
		if err := r.reportShutdown(tx, target, fx); err != nil {
			return res, false, err
		}
	}
	if target.ID == th.ID {
		fx.stop = true
	}
	return done(fmt.Sprintf("Thread %s is closed.", target.ID))
}

// execSendMessageToChild runs send_message_to_child (RAP BT-5): a note in
// a direct child's inbox.
func (r *Runtime) execSendMessageToChild(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (store.ToolResult, bool, error) {
	res, fail, done := builtinReply(c)
	var a struct {
		ThreadID string `json:"thread_id"`
		Message  string `json:"message"`
	}
	if err := decodeStrict(c.Arguments, &a); err != nil {
		return fail("arguments are not {\"thread_id\": string, \"message\": string}: %v", err)
	}
	if strings.TrimSpace(a.Message) == "" || len(a.Message) > maxBuiltinText {
		return fail("message must be 1 to %d bytes of text", maxBuiltinText)
	}
	t, err := tx.Thread(a.ThreadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.ParentID != th.ID) {
		// RAP BT-5: direct children only.
		return fail("thread %q is not a direct child of this thread (%s)", a.ThreadID, th.ID)
	}
	if err != nil {
		return res, false, err
	}
	if t.Status == store.ThreadClosed {
		return fail("child thread %s is closed", t.ID)
	}
	payload, _ := json.Marshal(store.UserMessage{Text: fmt.Sprintf("[message from the parent thread %s]\n%s", th.ID, a.Message)})
	if _, err := tx.Enqueue(store.InboxItem{ThreadID: t.ID, Kind: store.KindNote, Payload: payload,
		DedupKey: "child-message:" + th.ID + ":" + c.ID}); err != nil {
		return res, false, err
	}
	fx.wake = append(fx.wake, t.ID)
	return done(fmt.Sprintf("Message sent to child thread %s.", t.ID))
}
