package runtime

// This file owns closing a thread (RAP BT-4, TC-1): the client API's
// CloseThread and the transaction step that close_thread and CloseThread
// share.

import (
	"context"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// closeThreadTx closes a thread: it receives nothing more, its pending calls
// are cancelled, its timers dropped and its subscriptions ended; once the
// transaction commits every tool server gets /close_thread (RAP TC-1).
func (r *Runtime) closeThreadTx(tx store.Tx, th store.Thread, fx *effects) error {
	if err := tx.SetThreadStatus(th.ID, store.ThreadClosed); err != nil {
		return err
	}
	calls, err := tx.ThreadCalls(th.ID)
	if err != nil {
		return err
	}
	for _, c := range calls {
		if !c.State.Pending() {
			continue
		}
		if _, err := tx.SetCallState(th.ID, c.CallID, store.CallCancelled, store.CallNew, store.CallDispatched); err != nil {
			return err
		}
		if c.Toolset == builtinToolset {
			if err := tx.DeleteTimer(sleepTimerID(th.ID, c.CallID)); err != nil {
				return err
			}
		}
	}
	subs, err := tx.ThreadSubscriptions(th.ID)
	if err != nil {
		return err
	}
	for _, s := range subs {
		if s.State == store.SubscriptionActive {
			s.State = store.SubscriptionCancelled
			if err := tx.PutSubscription(s); err != nil {
				return err
			}
		}
	}
	if fx.closed == nil {
		fx.closed = map[string]bool{}
	}
	fx.closed[th.ID] = true
	fx.notices = append(fx.notices, notice{path: rap.CloseThreadPath, body: rap.CloseThreadRequest{ThreadID: th.ID}})
	fx.event(th.ID, EventThreadClosed, api.ThreadClosed{ThreadID: th.ID})
	if th.ParentID != "" {
		fx.event(th.ParentID, EventThreadClosed, api.ThreadClosed{ThreadID: th.ID})
	}
	return nil
}

// CloseThread closes a thread as close_thread does (RAP BT-4): it receives
// nothing more, its pending calls are cancelled, its subscriptions end, and
// every tool server gets /close_thread (RAP TC-1).
func (r *Runtime) CloseThread(ctx context.Context, threadID string) error {
	fx := &effects{}
	err := r.store.Update(ctx, func(tx store.Tx) error {
		*fx = effects{}
		th, err := visibleThread(ctx, tx, threadID)
		if err != nil {
			return err
		}
		if th.Status == store.ThreadClosed {
			return nil
		}
		if err := r.closeThreadTx(tx, th, fx); err != nil {
			return err
		}
		return r.reportShutdown(tx, th, fx)
	})
	if err != nil {
		return err
	}
	r.apply(fx)
	return nil
}
