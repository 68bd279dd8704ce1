package runtime

// This file owns interrupts (RAP CA-1, CA-2): before a user message is
// added, the thread's dispatched calls that no input answers are closed
// with an interrupted result, and their tools get /cancel_tool_call.

import (
	"context"
	"fmt"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// interruptedText is the synthetic result of a call interrupted by a new
// user message.
const interruptedText = "Interrupted: the user sent a new message before this call finished, so it was cancelled and its result will not be used. Call the tool again if it is still needed."

// interrupt closes every pending call of the thread that the batch does
// not answer with a synthetic "interrupted" result, in one transaction,
// before a new user input is added (so the history stays valid for every
// model API), and sends /cancel_tool_call for each (RAP CA-1). Late
// results of these calls are ignored (RAP CA-2).
//
// A call whose invocation the tool has not accepted yet (state new: its
// dispatch is on its way, or is redone after a restart) is left to finish:
// cancelling it would race its own invocation, which could reach the tool
// after the cancellation. The model sees a placeholder for it, and its
// result where it arrives.
//
// It reports whether it ran its transaction (touched): only then may the
// thread have changed, so only then must the slice load it again. (Touched
// is also true when every call's result had arrived meanwhile and nothing
// was cancelled: the reload then picks those results up.)
func (r *Runtime) interrupt(ctx context.Context, threadID string, calls []store.Call, b *batch) (touched bool, err error) {
	answered := map[string]bool{}
	for _, res := range b.results {
		answered[res.CallID] = true
	}
	var pending []store.Call
	for _, c := range calls {
		if c.State == store.CallDispatched && !answered[c.CallID] {
			pending = append(pending, c)
		}
	}
	if len(pending) == 0 {
		return false, nil
	}
	var cancelled []store.Call
	var appended []store.Message
	err = r.store.Update(ctx, func(tx store.Tx) error {
		cancelled, appended = nil, nil
		if err := r.coord.fence(ctx, tx, threadID); err != nil {
			return err
		}
		var results []store.ToolResult
		for _, c := range pending {
			changed, err := tx.SetCallState(threadID, c.CallID, store.CallCancelled, store.CallDispatched)
			if err != nil {
				return err
			}
			if !changed {
				continue // its result arrived meanwhile; it comes with the next batch
			}
			if c.Toolset == builtinToolset {
				if err := tx.DeleteTimer(sleepTimerID(threadID, c.CallID)); err != nil {
					return err
				}
			}
			cancelled = append(cancelled, c)
			results = append(results, store.ToolResult{CallID: c.CallID, Name: c.ToolName, Text: interruptedText})
		}
		if len(results) == 0 {
			return nil
		}
		var err error
		appended, err = tx.AppendMessages(threadID, []store.Message{{Role: store.RoleTool, ToolResults: results}})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("interrupt the pending calls of thread %s (RAP RT-4: nothing changed, the input stays queued): %w", threadID, err)
	}
	for _, c := range cancelled {
		r.log.Info("rap tool call interrupted", "audit", true, "operation", c.ToolName, "thread", threadID, "call_id", c.CallID, "outcome", "interrupted")
		if c.Toolset != builtinToolset {
			r.notifyServers(rap.CancelToolCallPath, rap.CancelToolCallRequest{ThreadID: threadID, ToolCallID: c.CallID})
		}
	}
	r.announce(threadID, appended)
	return true, nil
}
