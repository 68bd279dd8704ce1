package runtime

// This file owns the list of the threads waiting longest (GET
// /v1/waiting, rap status): the way from a metric, which names no
// thread, to the threads behind it.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// maxWaitingCalls bounds the pending calls one list reads to find its
// threads: a thread with many calls takes several of them.
const maxWaitingCalls = 2000

// maxWaitingFailed bounds the failed threads one list reads the queued
// inputs of.
const maxWaitingFailed = 1000

// maxLastErrorBytes bounds the error text a listed thread shows.
const maxLastErrorBytes = 1000

// waitCandidate is a thread a list may show: its calls waited on, oldest
// first; or its active subscriptions; or, for a failed thread, neither.
type waitCandidate struct {
	id    string
	since time.Time
	calls []store.Call
	subs  []store.Subscription
	more  int
	// retry is the thread's retry timer, for a thread whose completion
	// failed (in any process) and is retried at its due time.
	retry *store.Timer
}

// Waiting returns up to limit threads (below 1: api.DefaultWaitingLimit;
// at most api.MaxWaitingLimit) waiting longest, oldest first, as GET
// /v1/waiting answers it: the threads with a pending tool call (on a
// tool server, on the user, or a sleep), by their oldest; the threads
// whose only wait is an active subscription, by their oldest; the
// threads whose last completion failed, in this process or with a retry
// scheduled by any process sharing the store, by their oldest queued
// input; and, right after a listed thread, each ancestor waiting only on
// its child threads (api.WaitChildren). For a Caller bound to a user
// (WithCaller) only that user's threads are listed.
//
// It reads the pending calls oldest first from an index, at most
// maxWaitingCalls of them, the active subscriptions and the retry timers
// (at most maxWaitingFailed of each, when the store implements
// store.WaitLists), and then a few indexed rows per listed thread and
// its ancestors: its cost grows with limit, not with the store's
// history. A completion that failed for good in another process (its
// last attempt, no retry scheduled) is not known here: its thread is
// listed as running only by the census of runtime/metrics.
func (r *Runtime) Waiting(ctx context.Context, limit int) (api.WaitingResponse, error) {
	if limit < 1 {
		limit = api.DefaultWaitingLimit
	}
	limit = min(limit, api.MaxWaitingLimit)
	user, scoped := api.ScopedUser(ctx)
	r.mu.Lock()
	failed := make(map[string]error, len(r.failed))
	for id, err := range r.failed {
		failed[id] = err
	}
	r.mu.Unlock()
	resp := api.WaitingResponse{Threads: []api.WaitingThread{}}
	err := r.store.View(ctx, func(tx store.Tx) error {
		resp.Threads = resp.Threads[:0]
		resp.AsOf = time.Now().UTC()
		cands, err := waitingByCalls(tx, user, limit)
		if err != nil {
			return err
		}
		if wl, ok := tx.(store.WaitLists); ok {
			more, err := subscriptionCandidates(wl, cands, user, limit)
			if err != nil {
				return err
			}
			cands = append(cands, more...)
			if more, err = retryCandidates(tx, wl, cands); err != nil {
				return err
			}
			cands = append(cands, more...)
		}
		more, err := failedCandidates(tx, failed, cands, user, scoped)
		if err != nil {
			return err
		}
		cands = append(cands, more...)
		slices.SortStableFunc(cands, func(a, b waitCandidate) int {
			return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.id, b.id))
		})
		own := make(map[string]bool, len(cands))
		for _, c := range cands {
			own[c.id] = true
		}
		parents := map[string]int{} // listed parents waiting on children, by index in resp.Threads
		for _, c := range cands {
			if len(resp.Threads) == limit {
				break
			}
			w, ok, err := r.waitingThread(tx, c, failed[c.id])
			if err != nil {
				return err
			}
			if !ok || (scoped && w.UserID != user) {
				continue
			}
			resp.Threads = append(resp.Threads, w)
			if err := r.addWaitingParents(tx, &resp, w, own, parents, limit); err != nil {
				return err
			}
		}
		return nil
	})
	return resp, err
}

// waitingByCalls returns the threads of the oldest pending calls (of
// user's threads when user is not ""), by their oldest call: up to
// limit threads, reading at most maxWaitingCalls calls.
func waitingByCalls(tx store.Tx, user string, limit int) ([]waitCandidate, error) {
	var out []waitCandidate
	at := map[string]int{}
	after := store.CallCursor{}
	page := min(maxWaitingCalls, 4*limit)
	for read := 0; read < maxWaitingCalls; {
		calls, err := tx.OldestPendingCalls(user, after, min(page, maxWaitingCalls-read))
		if err != nil {
			return nil, err
		}
		for _, c := range calls {
			i, seen := at[c.ThreadID]
			if !seen {
				if len(out) == limit {
					return out, nil
				}
				i = len(out)
				at[c.ThreadID] = i
				out = append(out, waitCandidate{id: c.ThreadID, since: c.Created})
			}
			if len(out[i].calls) < api.MaxWaitItems {
				out[i].calls = append(out[i].calls, c)
			} else {
				out[i].more++
			}
		}
		read += len(calls)
		if len(calls) < page {
			break
		}
		after = store.CallCursorOf(calls[len(calls)-1])
	}
	return out, nil
}

// failedCandidates returns the threads of failed (failed in this
// process) that are not among have, each since its oldest queued input:
// at most maxWaitingFailed of them, those of user when scoped.
func failedCandidates(tx store.Tx, failed map[string]error, have []waitCandidate, user string, scoped bool) ([]waitCandidate, error) {
	listed := map[string]bool{}
	for _, c := range have {
		listed[c.id] = true
	}
	ids := make([]string, 0, len(failed))
	for id := range failed {
		if !listed[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []waitCandidate
	for _, id := range ids[:min(len(ids), maxWaitingFailed)] {
		if scoped {
			th, err := tx.Thread(id)
			if errors.Is(err, store.ErrNotFound) || (err == nil && th.UserID != user) {
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		q, err := tx.Queued(id)
		if err != nil {
			return nil, err
		}
		if len(q) == 0 {
			continue // answered since
		}
		out = append(out, waitCandidate{id: id, since: q[0].Created})
	}
	return out, nil
}

// subscriptionCandidates returns the threads with an active
// subscription (of user's threads when user is not "") that are not
// among have, by their oldest subscription: up to limit threads, reading
// at most maxWaitingFailed subscriptions.
func subscriptionCandidates(wl store.WaitLists, have []waitCandidate, user string, limit int) ([]waitCandidate, error) {
	subs, err := wl.OldestActiveSubscriptions(user, maxWaitingFailed)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, c := range have {
		listed[c.id] = true
	}
	var out []waitCandidate
	at := map[string]int{}
	for _, s := range subs {
		if listed[s.ThreadID] {
			continue
		}
		i, seen := at[s.ThreadID]
		if !seen {
			if len(out) == limit {
				break
			}
			i = len(out)
			at[s.ThreadID] = i
			out = append(out, waitCandidate{id: s.ThreadID, since: s.Created})
		}
		if len(out[i].subs) < api.MaxWaitItems {
			out[i].subs = append(out[i].subs, s)
		} else {
			out[i].more++
		}
	}
	return out, nil
}

// retryCandidates returns the threads with a scheduled retry of a failed
// completion (by any process sharing the store) that are not among have,
// each since its oldest queued input: at most maxWaitingFailed of them.
func retryCandidates(tx store.Tx, wl store.WaitLists, have []waitCandidate) ([]waitCandidate, error) {
	timers, err := wl.TimersOfKind(timerModelRetry, maxWaitingFailed)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, c := range have {
		listed[c.id] = true
	}
	var out []waitCandidate
	for _, tm := range timers {
		if listed[tm.ThreadID] {
			continue
		}
		listed[tm.ThreadID] = true
		q, err := tx.Queued(tm.ThreadID)
		if err != nil {
			return nil, err
		}
		if len(q) == 0 {
			continue
		}
		out = append(out, waitCandidate{id: tm.ThreadID, since: q[0].Created, retry: &tm})
	}
	return out, nil
}

// addWaitingParents lists, after w, each of its ancestors that waits
// only on its child threads and is not a candidate of its own (own),
// with a WaitChildren item for the child on its way to w; an ancestor
// already listed (parents) gets the item added. It stops at limit.
func (r *Runtime) addWaitingParents(tx store.Tx, resp *api.WaitingResponse, w api.WaitingThread, own map[string]bool, parents map[string]int, limit int) error {
	child, parentID := w.ThreadID, w.ParentID
	for depth := 0; parentID != "" && depth < maxStateDepth; depth++ {
		item := api.WaitItem{Kind: api.WaitChildren, ThreadID: child, Since: w.Since}
		if i, ok := parents[parentID]; ok {
			p := &resp.Threads[i]
			for _, it := range p.WaitingOn {
				if it.ThreadID == child {
					return nil // this branch is listed already
				}
			}
			if len(p.WaitingOn) < api.MaxWaitItems {
				p.WaitingOn = append(p.WaitingOn, item)
			} else {
				p.More++
			}
			return nil
		}
		if own[parentID] || len(resp.Threads) == limit {
			return nil
		}
		th, err := tx.Thread(parentID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		s, err := r.ownState(tx, th)
		if err != nil {
			return err
		}
		if s != api.StateQuiet {
			return nil // it has a wait of its own, or runs
		}
		root := th
		if th.RootID != "" && th.RootID != th.ID {
			if root, err = tx.Thread(th.RootID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		parents[th.ID] = len(resp.Threads)
		resp.Threads = append(resp.Threads, api.WaitingThread{ThreadID: th.ID, ParentID: th.ParentID, RootID: th.RootID, UserID: th.UserID,
			Title: sessionTitle(root), State: api.StateWaitingChildren, Since: w.Since, WaitingOn: []api.WaitItem{item}})
		child, parentID = th.ID, th.ParentID
	}
	return nil
}

// waitingThread reads what c waits on; ok is false when the thread is
// gone. failedErr is its failure in this process, if any.
func (r *Runtime) waitingThread(tx store.Tx, c waitCandidate, failedErr error) (api.WaitingThread, bool, error) {
	th, err := tx.Thread(c.id)
	if errors.Is(err, store.ErrNotFound) {
		return api.WaitingThread{}, false, nil
	}
	if err != nil {
		return api.WaitingThread{}, false, err
	}
	root := th
	if th.RootID != "" && th.RootID != th.ID {
		if root, err = tx.Thread(th.RootID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return api.WaitingThread{}, false, err
		}
	}
	w := api.WaitingThread{ThreadID: th.ID, ParentID: th.ParentID, RootID: th.RootID, UserID: th.UserID, Title: sessionTitle(root),
		Since: c.since, WaitingOn: []api.WaitItem{}, More: c.more}
	if w.State, err = r.ownState(tx, th); err != nil {
		return w, false, err
	}
	timers, err := tx.ThreadTimers(th.ID)
	if err != nil {
		return w, false, err
	}
	sleeps := map[string]time.Time{}
	var retryDue time.Time
	for _, t := range timers {
		switch t.Kind {
		case timerSleep:
			var p sleepPayload
			if json.Unmarshal(t.Payload, &p) == nil {
				sleeps[p.CallID] = t.Due
			}
		case timerModelRetry:
			retryDue = t.Due
		}
	}
	asking := map[string]bool{}
	if len(c.calls) > 0 {
		choices, err := tx.ThreadChoices(th.ID)
		if err != nil {
			return w, false, err
		}
		for _, ch := range choices {
			asking[ch.CallID] = true
		}
	}
	for _, call := range c.calls {
		item := api.WaitItem{Kind: api.WaitTool, CallID: call.CallID, Tool: call.ToolName, Toolset: call.Toolset, Since: call.Created}
		if due, ok := sleeps[call.CallID]; ok {
			item.Kind, item.Due = api.WaitTimer, due
		} else if asking[call.CallID] {
			item.Kind = api.WaitUser
		} else if call.Toolset != builtinToolset {
			seen, err := tx.SeenKey(oauthKey(th.ID, call.CallID))
			if err != nil {
				return w, false, err
			}
			if seen {
				item.Kind = api.WaitUser
			}
		}
		w.WaitingOn = append(w.WaitingOn, item)
	}
	for _, s := range c.subs {
		w.WaitingOn = append(w.WaitingOn, api.WaitItem{Kind: api.WaitSubscription, CallID: s.CallID, Tool: s.ToolName, Since: s.Created})
	}
	if len(c.calls) == 0 && len(c.subs) == 0 {
		w.WaitingOn = append(w.WaitingOn, api.WaitItem{Kind: api.WaitRetry, Since: c.since, Due: retryDue})
	}
	var marker retryMarker
	switch {
	case failedErr != nil:
		w.LastError = truncateUTF8(failedErr.Error(), maxLastErrorBytes)
	case c.retry != nil && json.Unmarshal(c.retry.Payload, &marker) == nil && marker.Error != "":
		w.LastError = marker.Error
	case w.State == api.StateFailed:
		w.LastErrorUnknown = true
	}
	return w, true, nil
}

// truncateUTF8 returns s cut to at most n bytes on a character boundary,
// with "…" when it was cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
