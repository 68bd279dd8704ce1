package runtime

// This file owns the built-in cancel_subscription (RAP BT-6, SU-7).

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// execCancelSubscription runs cancel_subscription (RAP BT-6, SU-7): it
// ends an active subscription of this thread; its tool gets
// /cancel_tool_call.
func (r *Runtime) execCancelSubscription(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (store.ToolResult, bool, error) {
	res, fail, done := builtinReply(c)
	var a struct {
		ToolCallID string `json:"tool_call_id"`
	}
	if err := decodeStrict(c.Arguments, &a); err != nil {
		return fail("arguments are not {\"tool_call_id\": string}: %v", err)
	}
	sub, err := tx.Subscription(th.ID, a.ToolCallID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sub.State != store.SubscriptionActive) {
		// RAP SU-7: only an active subscription of this thread.
		return fail("%q is not an active subscription of this thread; active ones: %s", a.ToolCallID, activeSubs(tx, th.ID))
	}
	if err != nil {
		return res, false, err
	}
	sub.State = store.SubscriptionCancelled
	if err := tx.PutSubscription(sub); err != nil {
		return res, false, err
	}
	fx.notices = append(fx.notices, notice{path: rap.CancelToolCallPath, body: rap.CancelToolCallRequest{ThreadID: th.ID, ToolCallID: sub.CallID}})
	return done(fmt.Sprintf("Subscription %s (%s) is cancelled; no more events will arrive from it.", sub.CallID, sub.ToolName))
}

func activeSubs(tx store.Tx, threadID string) string {
	subs, err := tx.ThreadSubscriptions(threadID)
	if err != nil {
		return "(unknown)"
	}
	var ids []string
	for _, s := range subs {
		if s.State == store.SubscriptionActive {
			ids = append(ids, s.CallID+" ("+s.ToolName+")")
		}
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
