package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// wake makes sure the thread has a worker. It is called after an inbox row
// of the thread was committed. If a worker is running it is told to look
// again before it exits, so no wake-up is lost.
func (r *Runtime) wake(threadID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.stopping {
		return // the row is durable; Start picks it up
	}
	if st := r.threads[threadID]; st != nil {
		st.again = true
		return
	}
	r.threads[threadID] = &threadState{}
	delete(r.failed, threadID)
	r.signalLocked()
	r.workers.Go(func() { r.work(threadID) })
}

// workerLinger is how long a slice worker or dispatcher that finished waits
// for the next job before it exits (see lingerPool).
const workerLinger = 100 * time.Millisecond

// work runs slices of the thread while it has inbox rows and returns when
// it has none.
func (r *Runtime) work(threadID string) {
	// issue 14: on a shared store the worker holds the thread's lease, or
	// another process works on it (and looks at the inbox once more when
	// it hands the thread back; the sweep catches the rest).
	var held, failed bool
	var stopRenew func()
	if r.shared.on {
		if !r.claimLease(r.baseCtx, threadID) {
			r.mu.Lock()
			delete(r.threads, threadID)
			r.signalLocked()
			r.mu.Unlock()
			return
		}
		held, stopRenew = true, r.keepLease(threadID)
		defer func() {
			if held {
				stopRenew()
				if !failed {
					// After a failed slice the lease is left to expire: the
					// sweep retries the thread then, not at once.
					r.releaseLease(threadID)
				}
			}
		}()
	}
	r.emit(threadID, EventStatus, api.Status{State: api.StateRunning})
	for {
		r.mu.Lock()
		st := r.threads[threadID]
		st.again = false
		r.mu.Unlock()

		progressed, err := r.slice(r.baseCtx, threadID)
		if err != nil && r.baseCtx.Err() == nil {
			r.log.Error("slice failed", "thread", threadID, "err", r.redact(err.Error()))
			r.emit(threadID, EventError, r.errorEvent(err))
		}

		r.mu.Lock()
		// Run again if the slice made progress (more rows may be queued) or
		// if new rows were committed meanwhile; after a failure, only the
		// latter (RAP RT-4: the next message retries).
		if r.baseCtx.Err() == nil && (st.again || (progressed && err == nil)) {
			r.mu.Unlock()
			continue
		}
		failed = err != nil && !progressed && r.baseCtx.Err() == nil // not a shutdown
		if held && !failed && r.baseCtx.Err() == nil {
			// Hand the thread back, then look at its inbox once more:
			// another process that committed an input meanwhile found the
			// thread held and left it to this one.
			r.mu.Unlock()
			stopRenew()
			r.releaseLease(threadID)
			held = false
			if r.hasQueued(threadID) && r.claimLease(r.baseCtx, threadID) {
				held, stopRenew = true, r.keepLease(threadID)
				continue
			}
			r.mu.Lock()
			if st.again && r.baseCtx.Err() == nil {
				// Woken after that look (an input committed since): take the
				// thread again, unless another process took it (it sees
				// the input).
				r.mu.Unlock()
				if r.claimLease(r.baseCtx, threadID) {
					held, stopRenew = true, r.keepLease(threadID)
					continue
				}
				r.mu.Lock()
			}
		}
		delete(r.threads, threadID)
		if err != nil && !progressed {
			r.failed[threadID] = err
		}
		r.signalLocked()
		r.mu.Unlock()
		r.hub.endTurn(threadID)
		r.emit(threadID, EventStatus, api.Status{State: api.StateIdle})
		return
	}
}

// batch is a thread's queued inbox rows, decoded.
type batch struct {
	ids     []int64
	results []store.ToolResult
	users   []store.Message // user messages and runtime notes, in order
	events  []store.Message // synthetic call/result pairs for inline events and child reports
	// interrupts is true when a user message is among the inputs: pending
	// calls are then closed before it is added (RAP CA-1).
	interrupts bool
	// wake is true when a row asks for a completion without adding history.
	wake bool
}

// messages returns the history messages the batch adds, results first so
// they directly follow the calls they answer.
func (b *batch) messages() []store.Message {
	var out []store.Message
	if len(b.results) > 0 {
		out = append(out, store.Message{Role: store.RoleTool, ToolResults: b.results})
	}
	out = append(out, b.events...)
	return append(out, b.users...)
}

// slice runs one slice of the thread (RAP RT-1). It reports whether it
// consumed anything.
func (r *Runtime) slice(ctx context.Context, threadID string) (progressed bool, err error) {
	var th store.Thread
	var items []store.InboxItem
	var history []store.Message
	var pending []store.Call        // the thread's calls still waiting for a result
	var known map[string]store.Call // pending calls and the calls the batch refers to
	var authPending map[string]bool
	var stack []string
	load := func(tx store.Tx) error {
		var err error
		if th, err = tx.Thread(threadID); err != nil {
			return err
		}
		if stack, err = threadStack(tx, th); err != nil {
			return err
		}
		if items, err = tx.Queued(threadID); err != nil || len(items) == 0 {
			return err
		}
		if history, err = r.hist.load(tx, threadID); err != nil {
			return err
		}
		if pending, err = tx.PendingCalls(threadID); err != nil {
			return err
		}
		known = make(map[string]store.Call, len(pending))
		for _, c := range pending {
			known[c.CallID] = c
		}
		// A result's call matters only to tell whether its turn still waits
		// for another pending call; an event's call always (its tool name
		// and arguments go with the event).
		for _, id := range referencedCalls(items, len(pending) > 0) {
			if _, ok := known[id]; ok {
				continue
			}
			c, err := tx.Call(threadID, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			known[id] = c
		}
		authPending = map[string]bool{}
		for _, c := range pending {
			if c.Toolset == builtinToolset {
				continue
			}
			seen, err := tx.SeenKey(oauthKey(threadID, c.CallID))
			if err != nil {
				return err
			}
			authPending[c.CallID] = seen
		}
		return nil
	}
	if err = r.store.QuickView(ctx, load); err != nil {
		return false, fmt.Errorf("load thread %s (RAP RT-4: slice stopped, nothing changed): %w", threadID, err)
	}
	if len(items) == 0 {
		return false, nil
	}
	if th.Status == store.ThreadClosed {
		return r.discardClosed(ctx, th, items)
	}
	b := r.decodeBatch(threadID, items, known)

	if !needsCompletion(b, pending, known) {
		appended, _, err := r.commit(ctx, th, b, nil, nil, nil, nil)
		if err != nil {
			return r.abandoned(threadID, err)
		}
		r.announce(threadID, appended)
		return true, nil
	}
	if b.interrupts {
		// RAP CA-1: close the pending calls before the user input is added.
		if err := r.interrupt(ctx, threadID, pending, b); err != nil {
			return false, err
		}
		if err = r.store.QuickView(ctx, load); err != nil {
			return false, fmt.Errorf("load thread %s (RAP RT-4: slice stopped, nothing changed): %w", threadID, err)
		}
		b = r.decodeBatch(threadID, items, known)
	}

	sess, err := r.sessionOf(ctx, th.RootID)
	if err != nil {
		return false, err
	}
	pendingInputs := b.messages()
	consumed := false
	placeholder := placeholderFor(authPending, inheritedCalls(threadID, history))
	for loop := 0; loop < MaxLoopsPerSlice; loop++ {
		req := r.buildRequest(threadID, sess, history, pendingInputs, placeholder)
		req.System = withThreadLine(req.System, stack)
		r.hub.beginTurn(threadID, lastSeqOf(history))
		resp, err := r.complete(ctx, threadID, req) // bounded in time (issue 9 item 17)
		if err != nil {
			// The inputs stay queued (RAP RT-4); a durable timer retries.
			return consumed, r.modelFailed(ctx, threadID, items, consumed, err)
		}
		r.recordUsage(threadID, resp.Usage)
		turn, rejected, accepted, builtins := r.planTurn(threadID, sess, resp, func(id string) bool {
			return r.hist.callIDUsed(threadID, id, history, pending)
		})
		var inputs *batch
		if !consumed {
			inputs = b
		}
		appended, fx, err := r.commit(ctx, th, inputs, &turn, rejected, accepted, builtins)
		if err != nil {
			if !consumed {
				return r.abandoned(threadID, err)
			}
			return consumed, err
		}
		consumed = true
		pendingInputs = nil
		r.hist.saved(threadID, history, appended)
		r.announce(threadID, appended)
		r.apply(fx)
		ancestors := stack[:len(stack)-1]
		for i := range accepted {
			accepted[i].TurnSeq = turnSeq(appended)
			r.dispatchAsync(accepted[i], ancestors)
		}
		pending = append(pending, accepted...)
		pending = append(pending, fx.calls...)
		immediate := len(rejected) + len(builtins) - len(fx.calls)
		if len(accepted) > 0 || len(fx.calls) > 0 || fx.stop || immediate == 0 {
			return true, nil
		}
		// Every call was answered at once (rejected, or a synchronous
		// built-in): let the model see the results now (RAP BT-7).
		history = append(history, appended...)
	}
	return true, fmt.Errorf("the model kept calling tools that answer at once %d times in a row; stopped this slice, send a message to continue", MaxLoopsPerSlice)
}

// ThreadLinePrefix starts the line the runtime appends to the system
// prompt to tell the model which thread it is in, for spawn_thread's
// child_of and close_thread's thread_id (RAP BT-2).
const ThreadLinePrefix = "[runtime] You are thread "

// withThreadLine appends the thread line to a system prompt.
func withThreadLine(system string, stack []string) string {
	if len(stack) == 0 {
		return system
	}
	line := ThreadLinePrefix + stack[len(stack)-1] + ". Your thread stack, root first: " + jsonString(stack) + "."
	if system == "" {
		return line
	}
	return system + "\n\n" + line
}

// oauthKey marks a call whose tool asked for authorization (RAP OA-1);
// the key holds no part of the auth URL.
func oauthKey(threadID, callID string) string { return "oauth:" + threadID + ":" + callID }

// authPendingText is the placeholder of a call waiting for the user to
// authorize its tool (RAP OA-1).
const authPendingText = "Authorization is in progress: the user was shown a link to authorize this tool. Its result will be added to the conversation once they have; do not call it again meanwhile."

// placeholderFor returns the placeholder text of each call whose result
// is missing: an authorization in progress, a call an ancestor thread made
// before this thread was started from it (its result never comes here:
// issue 9 item 3), or the default.
func placeholderFor(authPending map[string]bool, inherited map[string]string) func(callID string) string {
	return func(callID string) string {
		if authPending[callID] {
			return authPendingText
		}
		if owner, ok := inherited[callID]; ok {
			return inheritedCallText(owner)
		}
		return pendingResultText
	}
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
	if err := r.store.Update(ctx, func(tx store.Tx) error { return tx.Consume(ids) }); err != nil {
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

// callIDUsed reports whether a call of the thread already has id: a call
// in the history (every recorded call is in its turn; rejected and
// injected ones too) or a pending call. The history is scanned from
// history[from] on; the caller knows the part before.
func callIDUsed(id string, history []store.Message, from int, pending []store.Call) bool {
	for _, c := range pending {
		if c.CallID == id {
			return true
		}
	}
	for i := from; i < len(history); i++ {
		for _, c := range history[i].ToolCalls {
			if c.ID == id {
				return true
			}
		}
	}
	return false
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

// needsCompletion reports whether the batch should be answered by the
// model now. A batch of only tool results waits while another call of the
// same turn is still pending, so the model sees a turn's results together.
// pending are the thread's pending calls; known holds them and the calls
// the batch's results answer.
func needsCompletion(b *batch, pending []store.Call, known map[string]store.Call) bool {
	if len(b.users) > 0 || len(b.events) > 0 || b.wake {
		return true
	}
	if len(b.results) == 0 {
		return false
	}
	answered := map[string]bool{}
	turns := map[int64]bool{}
	unrecorded := false
	for _, res := range b.results {
		answered[res.CallID] = true
		if c, ok := known[res.CallID]; ok {
			turns[c.TurnSeq] = true
		} else {
			unrecorded = true
		}
	}
	for _, c := range pending {
		if turns[c.TurnSeq] && !answered[c.CallID] {
			delete(turns, c.TurnSeq) // this turn still waits for a result
		}
	}
	// Run the model if some turn is now complete, or if a result belongs to
	// no recorded call (it cannot wait for anything).
	return len(turns) > 0 || unrecorded
}

// referencedCalls returns the call ids the inbox rows belong to: those of
// subscription events, and those of tool results when withResults, so the
// slice can load those calls. Undecodable rows are skipped here and
// reported by decodeBatch.
func referencedCalls(items []store.InboxItem, withResults bool) []string {
	var ids []string
	for _, it := range items {
		var ref struct {
			CallID     string `json:"call_id"`
			ToolCallID string `json:"tool_call_id"`
		}
		switch {
		case it.Kind == store.KindToolResult && withResults:
			if json.Unmarshal(it.Payload, &ref) == nil && ref.CallID != "" {
				ids = append(ids, ref.CallID)
			}
		case it.Kind == store.KindSubscriptionEvent:
			if json.Unmarshal(it.Payload, &ref) == nil && ref.ToolCallID != "" {
				ids = append(ids, ref.ToolCallID)
			}
		}
	}
	return ids
}

// decodeBatch turns inbox rows into history messages. A row that cannot be
// decoded (which only a bug or a hand-edited database produces) is
// consumed and reported instead of blocking the thread forever.
func (r *Runtime) decodeBatch(threadID string, items []store.InboxItem, byID map[string]store.Call) *batch {
	b := &batch{}
	bad := func(it store.InboxItem, err error) {
		r.log.Error("dropping undecodable inbox row", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind, "err", err)
	}
	for _, it := range items {
		b.ids = append(b.ids, it.ID)
		switch it.Kind {
		case store.KindUserMessage, store.KindNote:
			var m store.UserMessage
			if err := json.Unmarshal(it.Payload, &m); err != nil {
				bad(it, err)
				continue
			}
			b.users = append(b.users, store.Message{Role: store.RoleUser, Text: m.Text, Created: it.Created})
			if it.Kind == store.KindUserMessage {
				b.interrupts = true
			}
		case store.KindToolResult:
			var res store.ToolResult
			if err := json.Unmarshal(it.Payload, &res); err != nil {
				bad(it, err)
				continue
			}
			b.results = append(b.results, res)
		case store.KindSubscriptionEvent:
			var ev rap.SubscriptionEvent
			if err := json.Unmarshal(it.Payload, &ev); err != nil {
				bad(it, err)
				continue
			}
			orig := byID[ev.ToolCallID]
			b.events = append(b.events, injectedPair(fmt.Sprintf("event_%d_%s", it.ID, ev.ToolCallID), orig.ToolName, ev.ToolCallID,
				orig.Arguments, ev.Text, fmt.Sprintf("event from %s", orig.ToolName))...)
		case store.KindChildReport:
			var rep store.ChildReport
			if err := json.Unmarshal(it.Payload, &rep); err != nil {
				bad(it, err)
				continue
			}
			verb := "Report"
			if rep.Final {
				verb = "Final report"
			}
			text := fmt.Sprintf("%s from child thread %s:\n%s", verb, rep.ChildID, rep.Report)
			if rep.Final && rep.Report == "" {
				text = shutdownText(rep.ChildID) // closed without a report (issue 9 item 6)
			}
			b.events = append(b.events, injectedPair(fmt.Sprintf("report_%d", it.ID), rep.OriginTool, rep.OriginCallID, rep.OriginArgs,
				text, fmt.Sprintf("report from thread %s", rep.ChildID))...)
		case store.KindWake:
			if wakeAsksCompletion(it.Payload) {
				b.wake = true
			}
		default:
			r.log.Error("dropping inbox row of unknown kind", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind)
		}
	}
	return b
}

// InjectedToolName is the reserved tool name of the synthetic call that
// carries a subscription event or a child thread's report into a thread
// (RAP SU-5, BT-3). It is never offered to the model, and a model call to
// it gets an error result.
const InjectedToolName = "receive_event__injected"

// injectedPair renders an event as a synthetic assistant call of the
// reserved tool, tied to the original call, and its result (RAP SU-5).
func injectedPair(id, origTool, origCallID string, origArgs json.RawMessage, text, display string) []store.Message {
	args, _ := json.Marshal(map[string]any{
		"original_tool_name":    origTool,
		"original_tool_call_id": origCallID,
		"original_args":         json.RawMessage(nonEmptyJSON(origArgs)),
	})
	return []store.Message{
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: id, Name: InjectedToolName, Arguments: args, Display: display}}},
		{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: id, Name: InjectedToolName, Text: text}}},
	}
}

func nonEmptyJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// planTurn turns the model's response into an assistant message, error
// results for calls that must not be dispatched (unknown tool, invalid
// arguments: RAP IN-2) and the calls to dispatch.
//
// used reports whether the thread already has a call with an id; it is
// asked only about ids the model gave.
func (r *Runtime) planTurn(threadID string, sess *session, resp *model.Response, used func(id string) bool) (store.Message, []store.ToolResult, []store.Call, []store.ToolCall) {
	kept := map[string]bool{} // ids of this turn
	turn := store.Message{Role: store.RoleAssistant, Text: resp.Text}
	var rejected []store.ToolResult
	var accepted []store.Call
	var builtins []store.ToolCall
	for _, mc := range resp.ToolCalls {
		id := mc.ID
		// IN-2: use the model's call id, or make a unique one when it is
		// missing or already used in this thread.
		if id == "" || kept[id] || used(id) {
			id = "call_" + strings.ReplaceAll(uuid.NewString(), "-", "") // unique by construction
		}
		kept[id] = true
		args := mc.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if isBuiltin(mc.Name) {
			tc := store.ToolCall{ID: id, Name: mc.Name, Arguments: args, Display: r.display(mc.Name, "", args)}
			turn.ToolCalls = append(turn.ToolCalls, tc)
			builtins = append(builtins, tc)
			continue
		}
		var tool *rap.ResolvedTool
		if mc.Name != InjectedToolName {
			tool, _ = sess.catalog.Lookup(mc.Name)
		}
		script := ""
		if tool != nil {
			script = tool.Tool.DisplayScript
		}
		turn.ToolCalls = append(turn.ToolCalls, store.ToolCall{ID: id, Name: mc.Name, Arguments: args, Display: r.display(mc.Name, script, args)})
		switch {
		case mc.Name == InjectedToolName:
			// RAP SU-5: the reserved name is the runtime's alone.
			rejected = append(rejected, store.ToolResult{CallID: id, Name: mc.Name, IsError: true,
				Text: fmt.Sprintf("Error: %s is reserved for events the runtime adds to the conversation; it cannot be called. Use one of the available tools.", InjectedToolName)})
		case tool == nil:
			rejected = append(rejected, store.ToolResult{CallID: id, Name: mc.Name, IsError: true,
				Text: fmt.Sprintf("Error: there is no tool named %q. Use one of the available tools: %s.", mc.Name, toolNames(sess))})
		default:
			if err := tool.ValidateArguments(args); err != nil {
				rejected = append(rejected, store.ToolResult{CallID: id, Name: mc.Name, IsError: true,
					Text: fmt.Sprintf("Error: the arguments of %s do not match its input schema: %v. Fix the arguments and call it again.", mc.Name, err)})
				continue
			}
			c := store.Call{ThreadID: threadID, CallID: id, ToolName: mc.Name, Arguments: args,
				Toolset: tool.Toolset, Endpoint: tool.Endpoint, State: store.CallNew}
			if d := r.timeoutFor(mc.Name); d > 0 {
				c.Deadline = time.Now().Add(d).UTC()
			}
			accepted = append(accepted, c)
		}
	}
	return turn, rejected, accepted, builtins
}

func toolNames(s *session) string {
	var names []string
	for _, t := range s.catalog.Tools() {
		if !isBuiltin(t.Tool.Name) {
			names = append(names, t.Tool.Name)
		}
	}
	for _, b := range builtinSpecs {
		names = append(names, b.Name)
	}
	return strings.Join(names, ", ")
}

func (r *Runtime) timeoutFor(tool string) time.Duration {
	if d, ok := r.cfg.ToolTimeouts[tool]; ok {
		return d
	}
	return r.cfg.DefaultToolTimeout
}

// display renders a call for people, falling back to name(args).
// A panicking hook is a failed display, never a failed slice (RAP DS-2).
func (r *Runtime) display(name, script string, args json.RawMessage) (text string) {
	fallback := name + "(" + string(args) + ")"
	if r.cfg.DisplayText == nil {
		return fallback
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Warn("display text hook panicked; using the default", "tool", name, "panic", fmt.Sprint(p))
			text = fallback
		}
	}()
	if s := r.cfg.DisplayText(name, script, args); s != "" {
		return s
	}
	return fallback
}

// commit appends the batch inputs (if any), the assistant turn (if any),
// runs the turn's built-in calls, appends the results of its rejected and
// built-in calls, records the accepted calls as pending, and consumes the
// batch — all in one transaction. The returned effects are to be applied
// once it committed.
func (r *Runtime) commit(ctx context.Context, th store.Thread, b *batch, turn *store.Message, rejected []store.ToolResult, accepted []store.Call, builtins []store.ToolCall) ([]store.Message, *effects, error) {
	threadID := th.ID
	var msgs []store.Message
	if b != nil {
		msgs = append(msgs, b.messages()...)
	}
	if turn != nil {
		msgs = append(msgs, *turn)
	}
	var appended []store.Message
	fx := &effects{}
	retry := b != nil && r.retries.mayHave(threadID)
	err := r.store.Update(ctx, func(tx store.Tx) error {
		*fx = effects{}
		var err error
		if appended, err = tx.AppendMessages(threadID, msgs); err != nil {
			return err
		}
		seq := turnSeq(appended)
		results := append([]store.ToolResult(nil), rejected...)
		for _, c := range builtins {
			res, done, err := r.execBuiltin(tx, th, c, fx)
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
			// completion of them is moot (issue 9 item 17).
			if retry {
				if err := tx.DeleteTimer(modelRetryTimerID(threadID)); err != nil {
					return err
				}
			}
			return tx.Consume(b.ids)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("save turn of thread %s (RAP RT-4: nothing was saved, the inputs stay queued): %w", threadID, err)
	}
	if retry {
		r.retries.disarmed(threadID)
	}
	for _, c := range accepted {
		if !c.Deadline.IsZero() {
			r.kickTimer() // a new deadline may be the earliest (RAP RT-5)
			break
		}
	}
	return appended, fx, nil
}

// announce publishes appended messages and their calls and results.
func (r *Runtime) announce(threadID string, msgs []store.Message) {
	if len(msgs) > 0 {
		r.hub.endTurn(threadID) // the turn is saved: its text is in the history
	}
	if !r.hub.watched(threadID) {
		return
	}
	for _, m := range msgs {
		for _, e := range messageEvents(threadID, m) {
			r.hub.publish(e)
		}
	}
}

// messageEvents are the events that announce a saved message: the message,
// then one per tool call and one per tool result. A full replay sends the
// history as the same events.
func messageEvents(threadID string, m store.Message) []Event {
	ev := func(typ string, data any) Event {
		b, _ := json.Marshal(data)
		return Event{Type: typ, ThreadID: threadID, Data: b, msgSeq: m.Seq}
	}
	out := []Event{ev(EventMessage, m)}
	for _, c := range m.ToolCalls {
		out = append(out, ev(EventToolCall, api.ToolCallEvent{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Display: c.Display}))
	}
	for _, res := range m.ToolResults {
		out = append(out, ev(EventToolResult, resultEvent(res)))
	}
	return out
}

func resultEvent(res store.ToolResult) api.ToolResultEvent {
	return api.ToolResultEvent{CallID: res.CallID, Name: res.Name, Text: res.Text, Content: res.Content,
		DisplayAs: res.DisplayAs, IsError: res.IsError}
}

// lastSeqOf returns the Seq of the last message of a history, 0 if empty.
func lastSeqOf(history []store.Message) int64 {
	if len(history) == 0 {
		return 0
	}
	return history[len(history)-1].Seq
}

// deltaStream forwards text deltas to the thread's subscribers.
type deltaStream struct {
	r        *Runtime
	threadID string
}

// TextDelta implements model.Stream.
func (d deltaStream) TextDelta(text string) {
	d.r.hub.delta(d.threadID, text)
}

// ErrSliceFailed is returned (wrapped) by Idle when the thread's last
// slice failed and its inputs stay queued until the next message.
var ErrSliceFailed = errors.New("the thread's last slice failed; its inputs stay queued until the next message")
