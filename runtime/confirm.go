package runtime

// This file owns the runtime's own confirmation of destructive tools.

import (
	"context"
	"fmt"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// The runtime's own confirmation of destructive tools (RAP
// TS-3): with Config.ConfirmDestructive, a call of a tool annotated
// destructive is not dispatched until the user allows it through the same
// user-choice picker tools use (GET/POST /v1/threads/{id}/choices). The
// pending question is a stored choice whose response URL is
// runtimeConfirmURL, so it survives a restart: Start dispatches the call's
// "new" state again, which finds the choice and keeps waiting.

// runtimeConfirmURL marks a stored choice the runtime answers itself.
const runtimeConfirmURL = "rap-runtime:confirm-destructive"

// Choices of a runtime confirmation; Deny is the default.
var confirmChoices = []string{"Allow", "Deny"}

const confirmDenyIndex = 1

// maxConfirmArgs bounds the arguments a confirmation prompt shows.
const maxConfirmArgs = 4 << 10

// awaitConfirmation reports whether c must wait for the user instead of
// being dispatched now; it asks the question when none is pending.
// ancestors are the thread's ancestors, root first, or nil when unknown.
// Calls of tools that are not destructive cost no store access.
func (r *Runtime) awaitConfirmation(ctx context.Context, c store.Call, ancestors []string) bool {
	if !r.cfg.ConfirmDestructive {
		return false
	}
	key := c.ThreadID + "\x00" + c.CallID
	if _, ok := r.confirmed.LoadAndDelete(key); ok {
		r.confirmRunning.Store(key, true) // dispatch deletes it when done
		return false                      // the user allowed it
	}
	if _, ok := r.confirmRunning.Load(key); ok {
		return true // the allowed dispatch of this call is under way
	}
	rootID := c.ThreadID
	if len(ancestors) > 0 {
		rootID = ancestors[0]
	} else if ancestors == nil {
		err := r.store.View(ctx, func(tx store.Tx) error {
			th, err := tx.Thread(c.ThreadID)
			if err == nil && th.RootID != "" {
				rootID = th.RootID
			}
			return err
		})
		if err != nil {
			r.log.Error("destructive-tool confirmation: cannot read the thread", "thread", c.ThreadID, "call_id", c.CallID, "err", err)
		}
	}
	if !r.isDestructive(ctx, rootID, c.ToolName) {
		return false
	}
	pending := false
	err := r.store.View(ctx, func(tx store.Tx) error {
		chs, err := tx.ThreadChoices(c.ThreadID)
		for _, ch := range chs {
			if ch.CallID == c.CallID && ch.ResponseURL == runtimeConfirmURL {
				pending = true
			}
		}
		return err
	})
	if err != nil {
		// Fail closed: a destructive tool never runs unasked. The call
		// stays "new" and is looked at again at the next Start.
		r.log.Error("destructive-tool confirmation: cannot read the thread's choices", "thread", c.ThreadID, "call_id", c.CallID, "err", err)
		return true
	}
	if pending {
		return true
	}
	args := string(c.Arguments)
	if len(args) > maxConfirmArgs {
		args = args[:maxConfirmArgs] + "…"
	}
	ch := store.Choice{
		ThreadID: c.ThreadID, CallID: c.CallID, ToolName: c.ToolName,
		Prompt:      fmt.Sprintf("The tool %s is marked destructive: it may delete or overwrite. Allow it to run with these arguments?\n%s", c.ToolName, args),
		Choices:     confirmChoices,
		Default:     confirmDenyIndex,
		ResponseURL: runtimeConfirmURL,
		Created:     time.Now().UTC(),
	}
	// The question is asked only while the call is still new: a dispatch
	// that started before the user's answer (Start's, after a restart) may
	// run after the allowed dispatch has sent the call.
	moved := false
	err = r.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.Call(c.ThreadID, c.CallID)
		if err != nil {
			return err
		}
		if moved = cur.State != store.CallNew; moved {
			return nil
		}
		return tx.PutChoice(ch)
	})
	if err != nil {
		r.log.Error("destructive-tool confirmation: cannot store the question", "thread", c.ThreadID, "call_id", c.CallID, "err", err)
		return true
	}
	if moved {
		return true // sent or ended already: nothing to ask, nothing to send
	}
	r.log.Info("destructive tool waits for the user's confirmation", "audit", true, "thread", c.ThreadID, "call_id", c.CallID, "operation", c.ToolName)
	r.emit(c.ThreadID, EventUserChoice, choiceEvent(apiChoice(ch)))
	return true
}

// isDestructive reports whether the session's tool is annotated
// destructive (RAP TS-3).
func (r *Runtime) isDestructive(ctx context.Context, rootID, tool string) bool {
	if rootID == "" {
		return false
	}
	sess, err := r.sessionOf(ctx, rootID)
	if err != nil || sess == nil || sess.catalog == nil {
		return false
	}
	t, ok := sess.catalog.Lookup(tool)
	return ok && t.Tool.Annotations != nil && t.Tool.Annotations.Destructive
}

// answerConfirmation acts on the user's answer to a runtime confirmation:
// Allow dispatches the call, Deny (or a dismissal) ends it with an error
// result without invoking the tool.
func (r *Runtime) answerConfirmation(ctx context.Context, c store.Call, sel int, dismissed bool) {
	r.emit(c.ThreadID, EventChoiceAnswered, api.ChoiceAnswered{CallID: c.CallID, Selected: sel, Dismissed: dismissed})
	r.log.Info("destructive tool confirmation answered", "audit", true, "thread", c.ThreadID, "call_id", c.CallID,
		"operation", c.ToolName, "allowed", sel == 0, "dismissed", dismissed)
	if sel == 0 {
		r.confirmed.Store(c.ThreadID+"\x00"+c.CallID, true)
		r.dispatchAsync(c, nil)
		return
	}
	r.deliverSynthetic(ctx, c, fmt.Sprintf("Error: the user denied running %s (it is marked destructive); it was not invoked and nothing was changed. Ask the user what to do instead.", c.ToolName))
}
