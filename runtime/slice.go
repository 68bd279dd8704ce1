package runtime

// This file owns one slice of a thread (RAP RT-1): load the thread and its
// queued inbox rows, ask the model (modelcall.go) until the turn needs no
// immediate answer, and commit each turn with its inputs, built-in results
// and pending calls in one transaction; the effects of the commit run after
// it (effects.go) and the accepted calls are dispatched (dispatch.go).

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/store"
)

// slice runs one slice of the thread (RAP RT-1). It reports whether it
// consumed anything, and whether it consumed every inbox row it loaded
// (drained): then the worker need not look at the inbox again unless a
// row was queued meanwhile (threadState.again).
func (r *Runtime) slice(ctx context.Context, threadID string) (progressed, drained bool, err error) {
	ctx, span := r.startSlice(ctx, threadID) // tracing.go
	defer func() { endSpan(span, err) }()
	// What load reads goes in one value rather than in seven variables
	// the closure would each move to the heap.
	var l struct {
		th          store.Thread
		items       []store.InboxItem
		history     []store.Message
		pending     []store.Call          // the thread's calls still waiting for a result
		known       map[string]store.Call // pending calls and the calls the batch refers to
		authPending map[string]bool
		stack       []string
	}
	load := func(tx store.Tx) error {
		var err error
		// A store that reads the thread, its inbox and its pending calls
		// in one exchange with its database does so.
		var facts *store.StateFacts
		if fr, ok := tx.(store.StateFactsReader); ok {
			f, err := fr.StateFacts(threadID)
			if err != nil {
				return err
			}
			l.th, facts = f.Thread, &f
		} else if l.th, err = tx.Thread(threadID); err != nil {
			return err
		}
		if l.stack, err = threadStack(tx, l.th); err != nil {
			return err
		}
		if facts != nil {
			l.items = facts.Queued
		} else if l.items, err = tx.Queued(threadID); err != nil {
			return err
		}
		if len(l.items) == 0 {
			return nil
		}
		if l.history, err = r.hist.load(tx, threadID); err != nil {
			return err
		}
		if facts != nil {
			l.pending = facts.PendingCalls
		} else if l.pending, err = tx.PendingCalls(threadID); err != nil {
			return err
		}
		l.known = make(map[string]store.Call, len(l.pending))
		for _, c := range l.pending {
			l.known[c.CallID] = c
		}
		// A result's call matters only to tell whether its turn still waits
		// for another pending call; an event's call always (its tool name
		// and arguments go with the event).
		for _, id := range referencedCalls(l.items, len(l.pending) > 0) {
			if _, ok := l.known[id]; ok {
				continue
			}
			c, err := tx.Call(threadID, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			l.known[id] = c
		}
		l.authPending = nil
		for _, c := range l.pending {
			if c.Toolset == builtinToolset {
				continue
			}
			seen, err := tx.SeenKey(oauthKey(threadID, c.CallID))
			if err != nil {
				return err
			}
			if l.authPending == nil { // only read: nil when no call can wait for authorization
				l.authPending = map[string]bool{}
			}
			l.authPending[c.CallID] = seen
		}
		return nil
	}
	if err = r.store.QuickView(ctx, load); err != nil {
		return false, false, fmt.Errorf("load thread %s (RAP RT-4: slice stopped, nothing changed): %w", threadID, err)
	}
	th, items, history, pending, known, authPending, stack := l.th, l.items, l.history, l.pending, l.known, l.authPending, l.stack
	if len(items) == 0 {
		return false, false, nil
	}
	if th.Status == store.ThreadClosed {
		r.hub.dropInflight(threadID)
		progressed, err = r.discardClosed(ctx, th, items)
		return progressed, false, err
	}
	b := r.decodeBatch(threadID, items, known)

	if !needsCompletion(b, pending, known) {
		appended, fx, err := r.commit(ctx, th, b, nil, nil, nil, nil, nil, true)
		if err != nil {
			progressed, err = r.abandoned(threadID, err)
			return progressed, false, err
		}
		if !fx.announced {
			r.announce(threadID, appended)
		}
		return true, true, nil
	}
	if b.interrupts {
		// RAP CA-1: close the pending calls before the user input is added.
		touched, err := r.interrupt(ctx, threadID, pending, b)
		if err != nil {
			return false, false, err
		}
		if touched {
			if err = r.store.QuickView(ctx, load); err != nil {
				return false, false, fmt.Errorf("load thread %s (RAP RT-4: slice stopped, nothing changed): %w", threadID, err)
			}
			th, items, history, pending, known, authPending, stack = l.th, l.items, l.history, l.pending, l.known, l.authPending, l.stack
			b = r.decodeBatch(threadID, items, known)
		}
	}

	sess, err := r.sessionOf(ctx, th.RootID)
	if err != nil {
		return false, false, err
	}
	pendingInputs := b.messages()
	// Clients see what the completion answers before anything it says.
	r.announceInputs(threadID, lastSeqOf(history), pendingInputs)
	consumed := false
	placeholder := placeholderFor(authPending, inheritedCalls(threadID, history))
	compactedForLength := false
	for loop := 0; loop < MaxLoopsPerSlice; loop++ {
		if over := r.sessionOverBudget(ctx, th.RootID); over != nil {
			return r.stopForBudget(ctx, threadID, consumed, lastSeqOf(history), over) // sessionbudget.go
		}
		req := r.requestFor(ctx, th, history, func(view []store.Message) model.Request {
			return r.buildRequest(threadID, sess, view, pendingInputs, placeholder)
		})
		req.System = withThreadLine(req.System, stack)
		r.hub.beginTurn(threadID, lastSeqOf(history))
		resp, err := r.complete(ctx, threadID, req) // bounded in time
		if err != nil && model.IsPromptTooLong(err) && !compactedForLength {
			// The provider says the prompt is over the window, which the
			// estimate missed: compact, and ask once more.
			compactedForLength = true
			if r.compactNow(ctx, th, history) {
				loop--
				continue
			}
		}
		if err != nil {
			if lost := r.coord.held(ctx); lost != nil {
				return consumed, false, r.resumeElsewhere(threadID, consumed, lastSeqOf(history), lost)
			}
			// The inputs stay queued (RAP RT-4); a durable timer retries.
			return consumed, false, r.modelFailed(ctx, threadID, items, consumed, err)
		}
		turn, rejected, accepted, builtins := r.planTurn(th, sess, resp, func(id string) bool {
			return r.hist.callIDUsed(threadID, id, history, pending)
		})
		turn.Usage = r.storedUsage(resp.Usage)
		var inputs *batch
		if !consumed {
			inputs = b
		}
		// The slice ends with this commit when the turn made calls that
		// answer later, or none that answers at once: the commit hands the
		// thread back then.
		last := len(accepted) > 0 || len(rejected)+len(builtins) == 0
		appended, fx, err := r.commit(ctx, th, inputs, &turn, rejected, accepted, builtins, resp.Compaction, last)
		if err != nil {
			if lost := r.coord.held(ctx); lost != nil {
				return consumed, false, r.resumeElsewhere(threadID, consumed, lastSeqOf(history), lost)
			}
			if !consumed {
				progressed, err = r.abandoned(threadID, err)
				return progressed, false, err
			}
			return consumed, false, err
		}
		consumed = true
		pendingInputs = nil
		r.hist.saved(threadID, history, appended)
		if !fx.announced {
			r.announce(threadID, appended)
		}
		// After the commit: a client that reads the thread's state after
		// this event finds the completion in its sums.
		r.recordUsage(threadID, resp.Usage)
		r.apply(fx)
		ancestors := stack[:len(stack)-1]
		if lost := r.coord.held(ctx); lost != nil && len(accepted) > 0 {
			// The calls are saved in state "new": the sweep for
			// undispatched calls sends them (redispatchOrphans).
			r.log.Warn("calls left undispatched: the thread's lease was lost right after their turn was saved; the sweep dispatches them",
				"thread", threadID, "calls", len(accepted))
			return true, false, nil
		}
		for i := range accepted {
			accepted[i].TurnSeq = turnSeq(appended)
			r.dispatchAsyncIn(trace.SpanContextFromContext(ctx), accepted[i], ancestors)
		}
		pending = append(pending, accepted...)
		pending = append(pending, fx.calls...)
		immediate := len(rejected) + len(builtins) - len(fx.calls)
		if len(accepted) > 0 || len(fx.calls) > 0 || fx.stop || immediate == 0 {
			return true, true, nil
		}
		// Every call was answered at once (rejected, or a synchronous
		// built-in): let the model see the results now (RAP BT-7).
		history = append(history, appended...)
	}
	return true, false, fmt.Errorf("the model kept calling tools that answer at once %d times in a row; stopped this slice, send a message to continue", MaxLoopsPerSlice)
}

// discardClosed consumes the inbox rows of a closed thread: nothing
// reaches a closed thread (RAP SU-9).
func (r *Runtime) discardClosed(ctx context.Context, th store.Thread, items []store.InboxItem) (bool, error) {
	ids := make([]int64, len(items))
	kinds := map[store.InboxKind]int{}
	for i, it := range items {
		ids[i] = it.ID
		kinds[it.Kind]++
	}
	err := r.store.Update(ctx, func(tx store.Tx) error {
		if err := r.coord.fence(ctx, tx, th.ID); err != nil {
			return err
		}
		return tx.Consume(ids)
	})
	if err != nil {
		return r.abandoned(th.ID, fmt.Errorf("discard the inbox of closed thread %s: %w", th.ID, err))
	}
	r.log.Warn("inputs for a closed thread discarded", "thread", th.ID, "count", len(items), "kinds", fmt.Sprint(kinds))
	return true, nil
}

// abandoned returns what a slice whose commit failed with err reports.
// When its inputs were consumed by another slice (another process sharing
// the store answered them: store.ErrConsumed), its work is dropped, not
// retried into a second answer, and the worker looks at the inbox again
// (progressed, no error); any other failure is the slice's.
func (r *Runtime) abandoned(threadID string, err error) (progressed bool, _ error) {
	if errors.Is(err, store.ErrConsumed) {
		r.log.Info("slice abandoned: its inputs were answered elsewhere", "thread", threadID)
		return true, nil
	}
	return false, err
}

// turnSeq returns the Seq of the assistant message among appended.
func turnSeq(appended []store.Message) int64 {
	for i := len(appended) - 1; i >= 0; i-- {
		if appended[i].Role == store.RoleAssistant {
			return appended[i].Seq
		}
	}
	return 0
}

// commit appends the batch inputs (if any), the assistant turn (if any),
// runs the turn's built-in calls, appends the results of its rejected and
// built-in calls, records the accepted calls as pending, and consumes the
// batch — all in one transaction. The returned effects are to be applied
// once it committed. A compaction the model's provider made while it
// answered (compacted, if any) is recorded in the same transaction. With
// last (the slice ends with this commit) the same transaction hands the
// thread back (coord.releaseInCommit).
func (r *Runtime) commit(ctx context.Context, th store.Thread, b *batch, turn *store.Message, rejected []store.ToolResult, accepted []store.Call, builtins []store.ToolCall, compacted *model.CompactionBlock, last bool) ([]store.Message, *effects, error) {
	threadID := th.ID
	var msgs []store.Message
	if b != nil {
		msgs = append(msgs, b.messages()...)
	}
	if turn != nil {
		msgs = append(msgs, *turn)
	}
	var appended []store.Message
	var comp *store.Compaction
	fx := &effects{}
	retry := b != nil && r.retries.mayHave(threadID)
	if err := r.coord.held(ctx); err != nil {
		return nil, nil, err
	}
	var release commitRelease
	if last {
		release = r.coord.releaseInCommit(ctx, threadID)
	}
	save := func(tx store.Tx) error {
		*fx = effects{}
		if err := r.coord.fence(ctx, tx, threadID); err != nil {
			return err
		}
		var err error
		if appended, err = tx.AppendMessages(threadID, msgs); err != nil {
			return err
		}
		if comp, err = r.addServerCompaction(tx, threadID, compacted, appended); err != nil {
			return err
		}
		seq := turnSeq(appended)
		results := append([]store.ToolResult(nil), rejected...)
		for _, c := range builtins {
			span := r.builtinSpan(ctx, c.Name, c.ID) // tracing.go
			res, done, err := r.execBuiltin(tx, th, c, fx)
			endSpan(span, err)
			if err != nil {
				return fmt.Errorf("built-in %s: %w", c.Name, err)
			}
			if done {
				results = append(results, res)
			}
		}
		if len(results) > 0 {
			more, err := tx.AppendMessages(threadID, []store.Message{{Role: store.RoleTool, ToolResults: results}})
			if err != nil {
				return err
			}
			appended = append(appended, more...)
		}
		pending := append(append([]store.Call(nil), accepted...), fx.calls...)
		if len(pending) > 0 {
			withSeq := make([]store.Call, len(pending))
			for i, c := range pending {
				c.TurnSeq = seq
				withSeq[i] = c
			}
			if err := tx.PutCalls(withSeq); err != nil {
				return err
			}
		}
		if b != nil {
			// The inputs are answered: a retry of an earlier failed
			// completion of them is moot.
			if retry {
				if err := tx.DeleteTimer(modelRetryTimerID(threadID)); err != nil {
					return err
				}
			}
			return tx.Consume(b.ids)
		}
		return nil
	}
	var err error
	if release != nil {
		// The events of what it saves go with it, before the thread is
		// another process's to take.
		var stored bool
		stored, err = release.commit(ctx, save, func() []Event { return r.hub.turnEvents(threadID, appended) })
		if stored {
			r.announceStored(threadID, appended)
			fx.announced = true
		}
	} else {
		err = r.coord.update(ctx, save)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("save turn of thread %s (RAP RT-4: nothing was saved, the inputs stay queued): %w", threadID, err)
	}
	if retry {
		r.retries.disarmed(threadID)
	}
	r.serverCompacted(threadID, comp)
	for _, c := range accepted {
		if !c.Deadline.IsZero() {
			r.kickTimer() // a new deadline may be the earliest (RAP RT-5)
			break
		}
	}
	return appended, fx, nil
}
