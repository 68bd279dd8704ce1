package runtime

// This file owns child threads (RAP BT-2, BT-3, SU-6; docs/threads.md):
// creating a child that inherits its parent's history, the thread spawned
// for a subscription event, a child's reports to its parent, the thread
// stack, and the placeholder of calls a child inherited.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// threadStack returns the ids from the root to th (RAP BT-2).
func threadStack(tx store.Tx, th store.Thread) ([]string, error) {
	stack := []string{th.ID}
	for p, n := th.ParentID, 0; p != ""; n++ {
		if n > 10000 {
			return nil, fmt.Errorf("thread %s: the parent chain does not end (a cycle in the store)", th.ID)
		}
		stack = append([]string{p}, stack...)
		pt, err := tx.Thread(p)
		if err != nil {
			return nil, err
		}
		p = pt.ParentID
	}
	return stack, nil
}

// createChild creates child so that it inherits the parent's history up to
// now: it sees the conversation up to its spawn point and never the
// parent's later messages. The inherited part is shared in the store, not
// copied (store.Thread.InheritSeq).
func (r *Runtime) createChild(tx store.Tx, child store.Thread, parentID string) error {
	last, err := tx.LastSeq(parentID)
	if err != nil {
		return err
	}
	child.InheritSeq = last
	return tx.CreateThread(child)
}

// report enqueues a child's report in its parent's inbox (RAP BT-3). It
// reports false when the parent is closed (the report is then dropped).
func (r *Runtime) report(tx store.Tx, child store.Thread, callID, text string, final bool, fx *effects) (bool, error) {
	parent, err := tx.Thread(child.ParentID)
	if err != nil {
		return false, err
	}
	if parent.Status == store.ThreadClosed {
		r.log.Warn("report discarded: the parent thread is closed", "thread", child.ID, "parent", parent.ID)
		return false, nil
	}
	payload, _ := json.Marshal(store.ChildReport{ChildID: child.ID, OriginCallID: child.OriginCallID, OriginTool: child.OriginTool,
		OriginArgs: child.OriginArgs, Report: text, Final: final})
	if _, err := tx.Enqueue(store.InboxItem{ThreadID: parent.ID, Kind: store.KindChildReport, Payload: payload,
		DedupKey: "report:" + child.ID + ":" + callID}); err != nil {
		return false, err
	}
	fx.wake = append(fx.wake, parent.ID)
	return true, nil
}

// shutdownReportKey is the call id part of the dedup key of the notice a
// child's parent gets when the child closed without a report.
const shutdownReportKey = "shutdown"

// reportShutdown tells the parent of a thread made by spawn_thread that it
// closed without a final report, so the parent does not wait for one.
// The notice is a final report with no text; see
// decodeBatch. Children made for subscription events close without a
// report when there is nothing to say, so their parents are not woken.
func (r *Runtime) reportShutdown(tx store.Tx, th store.Thread, fx *effects) error {
	if th.ParentID == "" || th.OriginTool != BuiltinSpawnThread {
		return nil
	}
	_, err := r.report(tx, th, shutdownReportKey, "", true, fx)
	return err
}

// shutdownText is what a parent sees when its spawned child closed without
// a final report.
func shutdownText(childID string) string {
	return fmt.Sprintf("Child thread %s has shut down without a report: it will send nothing more and takes no messages.", childID)
}

// inheritedCalls maps the id of every call in the part of a child thread's
// history inherited from its ancestors to the thread that made it. Such a
// call's result, if it ever comes, goes to that thread's history, never to
// the child's. A root thread has none.
func inheritedCalls(threadID string, history []store.Message) map[string]string {
	var out map[string]string
	for i := range history {
		m := &history[i]
		if m.ThreadID == threadID || m.ThreadID == "" {
			break // the thread's own messages follow the inherited ones
		}
		for _, c := range m.ToolCalls {
			if out == nil {
				out = map[string]string{}
			}
			out[c.ID] = m.ThreadID
		}
	}
	return out
}

// inheritedCallText is the placeholder result, in a child thread, of a
// call its ancestor made that had no result when the child was started:
// the child's model must not wait for it.
func inheritedCallText(owner string) string {
	return fmt.Sprintf("This call belongs to thread %s, from which this thread was started. Its result goes to that thread and will never arrive here: "+
		"do not wait for it. If you need it, call the tool again in this thread.", owner)
}

// eventThreadNote is the instruction a thread spawned for a subscription
// event starts with (RAP SU-6).
func eventThreadNote(childID, tool string) string {
	return fmt.Sprintf("[runtime] This thread (%s) was started to handle the subscription event of %s shown above. Handle it. "+
		"Then call close_thread with thread_id %q, giving report_to_parent with what the parent thread needs to know, "+
		"or without report_to_parent if nothing needs reporting.", childID, tool, childID)
}

// spawnEventThread creates the child thread that handles one
// non-associative subscription event (RAP SU-6): it inherits the parent's
// history so far, then the event as a synthetic call of the reserved tool
// (RAP SU-5), then an instruction to handle it and report or close.
func (r *Runtime) spawnEventThread(tx store.Tx, parent store.Thread, sub store.Call, ev *rap.SubscriptionEvent, fx *effects) error {
	child := store.Thread{ID: store.NewThreadID(), ParentID: parent.ID, RootID: parent.RootID, Status: store.ThreadActive,
		OriginCallID: sub.CallID, OriginTool: sub.ToolName, OriginArgs: sub.Arguments}
	if err := r.createChild(tx, child, parent.ID); err != nil {
		return err
	}
	pair := injectedPair("event_"+strings.ReplaceAll(uuid.NewString(), "-", ""), sub.ToolName, sub.CallID, sub.Arguments, ev.Text,
		fmt.Sprintf("event from %s", sub.ToolName))
	if _, err := tx.AppendMessages(child.ID, pair); err != nil {
		return err
	}
	payload, _ := json.Marshal(store.UserMessage{Text: eventThreadNote(child.ID, sub.ToolName)})
	if _, err := tx.Enqueue(store.InboxItem{ThreadID: child.ID, Kind: store.KindNote, Payload: payload, DedupKey: "wake:" + child.ID}); err != nil {
		return err
	}
	fx.wake = append(fx.wake, child.ID)
	fx.event(parent.ID, EventThreadSpawned, api.ThreadSpawned{ThreadID: child.ID, ParentID: parent.ID,
		OriginCallID: sub.CallID, OriginTool: sub.ToolName, Reason: api.SubscriptionEvent})
	return nil
}
