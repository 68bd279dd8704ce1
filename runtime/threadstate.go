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
	return r.threadStateWith(tx, th, nil)
}

// threadStateWith is threadState given th's own records already read
// (facts, when not nil).
func (r *Runtime) threadStateWith(tx store.Tx, th store.Thread, facts *store.StateFacts) (api.ThreadState, error) {
	budget := maxStateThreads
	return r.stateOf(tx, th, facts, 0, &budget)
}

// stateOf returns th's state: its own, or, when nothing of its own is
// pending, waiting_children while a descendant is neither settled nor
// closed. budget counts the threads still to be read.
func (r *Runtime) stateOf(tx store.Tx, th store.Thread, facts *store.StateFacts, depth int, budget *int) (api.ThreadState, error) {
	*budget--
	own, err := r.ownStateFrom(th, stateReads{tx: tx, id: th.ID, facts: facts})
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
		s, err := r.stateOf(tx, k, nil, depth+1, budget)
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

// stateReads reads the records of one thread that its own state is made
// of: from facts read beforehand when there are some, else from tx.
type stateReads struct {
	tx    store.Tx
	id    string
	facts *store.StateFacts
}

func (s stateReads) queued() ([]store.InboxItem, error) {
	if s.facts != nil {
		return s.facts.Queued, nil
	}
	return s.tx.Queued(s.id)
}

func (s stateReads) timers() ([]store.Timer, error) {
	if s.facts != nil {
		return s.facts.Timers, nil
	}
	return s.tx.ThreadTimers(s.id)
}

func (s stateReads) choices() ([]store.Choice, error) {
	if s.facts != nil {
		return s.facts.Choices, nil
	}
	return s.tx.ThreadChoices(s.id)
}

func (s stateReads) pendingCalls() ([]store.Call, error) {
	if s.facts != nil {
		return s.facts.PendingCalls, nil
	}
	return s.tx.PendingCalls(s.id)
}

func (s stateReads) subscriptions() ([]store.Subscription, error) {
	if s.facts != nil {
		return s.facts.Subscriptions, nil
	}
	return s.tx.ThreadSubscriptions(s.id)
}

// ownState returns th's state leaving its children out.
func (r *Runtime) ownState(tx store.Tx, th store.Thread) (api.ThreadState, error) {
	return r.ownStateFrom(th, stateReads{tx: tx, id: th.ID})
}

// ownStateFrom is ownState reading th's records through rd.
func (r *Runtime) ownStateFrom(th store.Thread, rd stateReads) (api.ThreadState, error) {
	tx, id := rd.tx, th.ID
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
	queued, err := rd.queued()
	if err != nil {
		return "", err
	}
	timers, err := rd.timers()
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
	choices, err := rd.choices()
	if err != nil || len(choices) > 0 {
		return api.StateWaitingUser, err
	}
	calls, err := rd.pendingCalls()
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
		subs, err := rd.subscriptions()
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
		fr, together := tx.(store.StateFactsReader)
		for depth := 0; id != "" && depth <= maxStateDepth; depth++ {
			var th store.Thread
			var facts *store.StateFacts
			var err error
			if together {
				f, err := fr.StateFacts(id)
				if err != nil {
					return err
				}
				th, facts = f.Thread, &f
			} else if th, err = tx.Thread(id); err != nil {
				return err
			}
			s, err := r.threadStateWith(tx, th, facts)
			if err != nil {
				return err
			}
			var last int64
			if facts != nil {
				last = facts.LastSeq
			} else if last, err = tx.LastSeq(id); err != nil {
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
