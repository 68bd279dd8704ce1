package runtime

// This file owns where a thread stands (api.ThreadState): computed from
// its records and this process's workers, in ThreadInfo and in the
// turn_ended event published when a turn of the thread, or of one of its
// descendants, ends.

import (
	"context"
	"encoding/json"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// maxStateDepth bounds how deep a thread's state looks into its
// descendants; deeper ones count as waiting.
const maxStateDepth = 16

// maxStateThreads bounds how many threads one state reads; past it, the
// children not read count as waiting.
const maxStateThreads = 200

// threadState returns th's state, read in tx.
func (r *Runtime) threadState(tx store.Tx, th store.Thread) (api.ThreadState, error) {
	budget := maxStateThreads
	return r.stateOf(tx, th, 0, &budget)
}

// stateOf returns th's state: its own, or, when nothing of its own is
// pending, waiting_children while a descendant is neither settled nor
// closed. budget counts the threads still to be read.
func (r *Runtime) stateOf(tx store.Tx, th store.Thread, depth int, budget *int) (api.ThreadState, error) {
	*budget--
	own, err := r.ownState(tx, th)
	if err != nil || own != api.StateQuiet {
		return own, err
	}
	if depth >= maxStateDepth || *budget <= 0 {
		return api.StateWaitingChildren, nil
	}
	kids, err := tx.ChildThreads(th.ID, store.ThreadCursor{}, maxStatusChildren)
	if err != nil {
		return "", err
	}
	failed := false
	for _, k := range kids {
		if k.Status == store.ThreadClosed {
			continue
		}
		if *budget <= 0 {
			return api.StateWaitingChildren, nil
		}
		s, err := r.stateOf(tx, k, depth+1, budget)
		if err != nil {
			return "", err
		}
		switch s {
		case api.StateQuiet, api.StateClosed:
		case api.StateFailed:
			failed = true
		default:
			return api.StateWaitingChildren, nil
		}
	}
	if failed {
		return api.StateFailed, nil
	}
	return api.StateQuiet, nil
}

// ownState returns th's state leaving its children out.
func (r *Runtime) ownState(tx store.Tx, th store.Thread) (api.ThreadState, error) {
	id := th.ID
	if th.Status == store.ThreadClosed {
		return api.StateClosed, nil
	}
	if r.moves.paused(id) {
		return api.StateMoving, nil
	}
	r.mu.Lock()
	_, running := r.threads[id]
	failedHere := r.failed[id] != nil
	r.mu.Unlock()
	if running {
		return api.StateRunning, nil
	}
	queued, err := tx.Queued(id)
	if err != nil {
		return "", err
	}
	timers, err := tx.ThreadTimers(id)
	if err != nil {
		return "", err
	}
	if len(queued) > 0 {
		retrying := failedHere
		for _, t := range timers {
			retrying = retrying || t.ID == modelRetryTimerID(id)
		}
		if retrying {
			return api.StateFailed, nil
		}
		return api.StateRunning, nil
	}
	choices, err := tx.ThreadChoices(id)
	if err != nil || len(choices) > 0 {
		return api.StateWaitingUser, err
	}
	calls, err := tx.PendingCalls(id)
	if err != nil {
		return "", err
	}
	sleeping := map[string]bool{}
	for _, t := range timers {
		if t.Kind == timerSleep {
			var p sleepPayload
			if json.Unmarshal(t.Payload, &p) == nil {
				sleeping[p.CallID] = true
			}
		}
	}
	tools, timer := false, false
	for _, c := range calls {
		switch {
		case sleeping[c.CallID]:
			timer = true
		case c.Toolset != builtinToolset:
			seen, err := tx.SeenKey(oauthKey(id, c.CallID))
			if err != nil {
				return "", err
			}
			if seen {
				return api.StateWaitingUser, nil
			}
			tools = true
		default:
			tools = true
		}
	}
	if !tools {
		subs, err := tx.ThreadSubscriptions(id)
		if err != nil {
			return "", err
		}
		for _, s := range subs {
			tools = tools || s.State == store.SubscriptionActive
		}
	}
	switch {
	case tools:
		return api.StateWaitingTools, nil
	case timer:
		return api.StateWaitingTimer, nil
	}
	return api.StateQuiet, nil
}

// turnEnded publishes turn_ended on the thread whose worker just went
// idle, and on each of its ancestors, with each one's state now. Nothing
// is read when nobody can be streaming them.
func (r *Runtime) turnEnded(threadID string) {
	if !r.hub.anyWatched() {
		return
	}
	ctx, cancel := context.WithTimeout(r.baseCtx, notifyTimeout)
	defer cancel()
	type ended struct {
		thread string
		data   api.TurnEnded
	}
	var out []ended
	err := r.store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		id := threadID
		for depth := 0; id != "" && depth <= maxStateDepth; depth++ {
			th, err := tx.Thread(id)
			if err != nil {
				return err
			}
			s, err := r.threadState(tx, th)
			if err != nil {
				return err
			}
			last, err := tx.LastSeq(id)
			if err != nil {
				return err
			}
			out = append(out, ended{id, api.TurnEnded{ThreadID: threadID, State: s, LastSeq: last}})
			id = th.ParentID
		}
		return nil
	})
	if err != nil {
		if r.baseCtx.Err() == nil && !r.threadDeleted(threadID) {
			r.log.Warn("read the state of a thread whose turn ended", "thread", threadID, "err", err)
		}
		return
	}
	for _, e := range out {
		r.emit(e.thread, EventTurnEnded, e.data)
	}
}
