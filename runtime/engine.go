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
	r.wg.Add(1)
	go r.work(threadID)
}

// work is a thread's worker: it runs slices while the thread has inbox rows
// and exits when it has none.
func (r *Runtime) work(threadID string) {
	defer r.wg.Done()
	r.emit(threadID, EventStatus, map[string]string{"state": "running"})
	for {
		r.mu.Lock()
		st := r.threads[threadID]
		st.again = false
		r.mu.Unlock()

		progressed, err := r.slice(r.baseCtx, threadID)
		if err != nil && r.baseCtx.Err() == nil {
			r.log.Error("slice failed", "thread", threadID, "err", err)
			r.emit(threadID, EventError, map[string]string{"message": err.Error()})
		}

		r.mu.Lock()
		// Run again if the slice made progress (more rows may be queued) or
		// if new rows were committed meanwhile; after a failure, only the
		// latter (RAP RT-4: the next message retries).
		if r.baseCtx.Err() == nil && (st.again || (progressed && err == nil)) {
			r.mu.Unlock()
			continue
		}
		delete(r.threads, threadID)
		if err != nil && !progressed {
			r.failed[threadID] = err
		}
		r.signalLocked()
		r.mu.Unlock()
		r.emit(threadID, EventStatus, map[string]string{"state": "idle"})
		return
	}
}

// batch is a thread's queued inbox rows, decoded.
type batch struct {
	ids     []int64
	results []store.ToolResult
	users   []store.Message
	events  []store.Message // synthetic call/result pairs for subscription events
}

func (b *batch) empty() bool { return len(b.ids) == 0 }

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
	var calls []store.Call
	err = r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if th, err = tx.Thread(threadID); err != nil {
			return err
		}
		if items, err = tx.Queued(threadID); err != nil || len(items) == 0 {
			return err
		}
		if history, err = tx.History(threadID); err != nil {
			return err
		}
		calls, err = tx.ThreadCalls(threadID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("load thread %s (RAP RT-4: slice stopped, nothing changed): %w", threadID, err)
	}
	if len(items) == 0 {
		return false, nil
	}
	b := r.decodeBatch(threadID, items, calls)

	if !needsCompletion(b, calls) {
		appended, err := r.commit(ctx, threadID, b, nil, nil, nil)
		if err != nil {
			return false, err
		}
		r.announce(threadID, appended)
		return true, nil
	}

	sess, err := r.sessionOf(ctx, th.RootID)
	if err != nil {
		return false, err
	}
	pendingInputs := b.messages()
	consumed := false
	for loop := 0; loop < MaxLoopsPerSlice; loop++ {
		req := r.buildRequest(sess, append(append([]store.Message(nil), history...), pendingInputs...), calls)
		resp, err := r.model.Complete(ctx, req, deltaStream{r: r, threadID: threadID})
		if err != nil {
			if consumed {
				return true, fmt.Errorf("model %s failed after the turn was saved; send a message to retry: %w", r.model.Name(), err)
			}
			return false, fmt.Errorf("model %s failed; your message is kept and is retried with the next message (RAP RT-4): %w", r.model.Name(), err)
		}
		turn, rejected, accepted := r.planTurn(threadID, sess, resp, usedCallIDs(history, calls))
		var inputs *batch
		if !consumed {
			inputs = b
		}
		appended, err := r.commit(ctx, threadID, inputs, &turn, rejected, accepted)
		if err != nil {
			return consumed, err
		}
		consumed = true
		pendingInputs = nil
		history = append(history, appended...)
		r.announce(threadID, appended)
		for i := range accepted {
			accepted[i].TurnSeq = turnSeq(appended)
			r.dispatchAsync(accepted[i])
		}
		calls = append(calls, accepted...)
		if len(accepted) > 0 || len(rejected) == 0 {
			return true, nil
		}
		// Every call was rejected: let the model see the errors at once
		// (RAP BT-7).
	}
	return true, fmt.Errorf("the model kept calling unavailable tools %d times in a row; stopped this slice, send a message to continue", MaxLoopsPerSlice)
}

// usedCallIDs returns every call id of the thread so far: recorded calls
// and the calls in the history (rejected and injected ones included).
func usedCallIDs(history []store.Message, calls []store.Call) map[string]bool {
	used := map[string]bool{}
	for _, c := range calls {
		used[c.CallID] = true
	}
	for _, m := range history {
		for _, c := range m.ToolCalls {
			used[c.ID] = true
		}
	}
	return used
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
func needsCompletion(b *batch, calls []store.Call) bool {
	if len(b.users) > 0 || len(b.events) > 0 {
		return true
	}
	if len(b.results) == 0 {
		return false
	}
	answered := map[string]bool{}
	turns := map[int64]bool{}
	byID := map[string]store.Call{}
	for _, c := range calls {
		byID[c.CallID] = c
	}
	for _, res := range b.results {
		answered[res.CallID] = true
		if c, ok := byID[res.CallID]; ok {
			turns[c.TurnSeq] = true
		}
	}
	for _, c := range calls {
		if turns[c.TurnSeq] && c.State.Pending() && !answered[c.CallID] {
			delete(turns, c.TurnSeq) // this turn still waits for a result
		}
	}
	// Run the model if some turn is now complete, or if a result belongs to
	// no recorded call (it cannot wait for anything).
	return len(turns) > 0 || len(answered) > countRecorded(answered, byID)
}

func countRecorded(ids map[string]bool, byID map[string]store.Call) int {
	n := 0
	for id := range ids {
		if _, ok := byID[id]; ok {
			n++
		}
	}
	return n
}

// decodeBatch turns inbox rows into history messages. A row that cannot be
// decoded (which only a bug or a hand-edited database produces) is
// consumed and reported instead of blocking the thread forever.
func (r *Runtime) decodeBatch(threadID string, items []store.InboxItem, calls []store.Call) *batch {
	b := &batch{}
	byID := map[string]store.Call{}
	for _, c := range calls {
		byID[c.CallID] = c
	}
	for _, it := range items {
		b.ids = append(b.ids, it.ID)
		switch it.Kind {
		case store.KindUserMessage:
			var m store.UserMessage
			if err := json.Unmarshal(it.Payload, &m); err != nil {
				r.log.Error("dropping undecodable inbox row", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind, "err", err)
				continue
			}
			b.users = append(b.users, store.Message{Role: store.RoleUser, Text: m.Text, Created: it.Created})
		case store.KindToolResult:
			var res store.ToolResult
			if err := json.Unmarshal(it.Payload, &res); err != nil {
				r.log.Error("dropping undecodable inbox row", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind, "err", err)
				continue
			}
			b.results = append(b.results, res)
		case store.KindSubscriptionEvent:
			var ev rap.SubscriptionEvent
			if err := json.Unmarshal(it.Payload, &ev); err != nil {
				r.log.Error("dropping undecodable inbox row", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind, "err", err)
				continue
			}
			b.events = append(b.events, injectedEvent(it.ID, ev, byID[ev.ToolCallID])...)
		default:
			r.log.Error("dropping inbox row of unknown kind", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind)
		}
	}
	return b
}

// InjectedToolName is the reserved tool name of the synthetic call that
// carries a subscription event into a thread (RAP SU-5). It is never
// offered to the model.
const InjectedToolName = "receive_event__injected"

// injectedEvent renders a subscription event as a synthetic assistant call
// and its result (RAP SU-5). This issue injects every event inline; spawning
// a child thread for non-associative events (RAP SU-6) comes with child
// threads.
func injectedEvent(inboxID int64, ev rap.SubscriptionEvent, orig store.Call) []store.Message {
	args, _ := json.Marshal(map[string]any{
		"original_tool_name":    orig.ToolName,
		"original_tool_call_id": ev.ToolCallID,
		"original_args":         json.RawMessage(nonEmptyJSON(orig.Arguments)),
	})
	id := fmt.Sprintf("event_%d_%s", inboxID, ev.ToolCallID)
	return []store.Message{
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: id, Name: InjectedToolName, Arguments: args,
			Display: fmt.Sprintf("event from %s", orig.ToolName)}}},
		{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: id, Name: InjectedToolName, Text: ev.Text}}},
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
func (r *Runtime) planTurn(threadID string, sess *session, resp *model.Response, used map[string]bool) (store.Message, []store.ToolResult, []store.Call) {
	turn := store.Message{Role: store.RoleAssistant, Text: resp.Text}
	var rejected []store.ToolResult
	var accepted []store.Call
	for _, mc := range resp.ToolCalls {
		id := mc.ID
		// IN-2: use the model's call id, or make a unique one when it is
		// missing or already used in this thread.
		if id == "" || used[id] {
			id = "call_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		}
		used[id] = true
		args := mc.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
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
	return turn, rejected, accepted
}

func toolNames(s *session) string {
	tools := s.catalog.Tools()
	if len(tools) == 0 {
		return "(none are loaded)"
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Tool.Name
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

// commit appends the batch inputs (if any), the assistant turn (if any)
// and the error results of its rejected calls, records the accepted calls
// as pending, and consumes the batch — all in one transaction.
func (r *Runtime) commit(ctx context.Context, threadID string, b *batch, turn *store.Message, rejected []store.ToolResult, accepted []store.Call) ([]store.Message, error) {
	var msgs []store.Message
	if b != nil {
		msgs = append(msgs, b.messages()...)
	}
	if turn != nil {
		msgs = append(msgs, *turn)
	}
	if len(rejected) > 0 {
		msgs = append(msgs, store.Message{Role: store.RoleTool, ToolResults: rejected})
	}
	var appended []store.Message
	err := r.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if appended, err = tx.AppendMessages(threadID, msgs); err != nil {
			return err
		}
		if len(accepted) > 0 {
			seq := turnSeq(appended)
			withSeq := make([]store.Call, len(accepted))
			for i, c := range accepted {
				c.TurnSeq = seq
				withSeq[i] = c
			}
			if err := tx.PutCalls(withSeq); err != nil {
				return err
			}
		}
		if b != nil {
			return tx.Consume(b.ids)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("save turn of thread %s (RAP RT-4: nothing was saved, the inputs stay queued): %w", threadID, err)
	}
	if len(accepted) > 0 {
		r.kickTimer()
	}
	return appended, nil
}

// announce publishes appended messages and their calls and results.
func (r *Runtime) announce(threadID string, msgs []store.Message) {
	for _, m := range msgs {
		r.emit(threadID, EventMessage, m)
		for _, c := range m.ToolCalls {
			r.emit(threadID, EventToolCall, map[string]any{"call_id": c.ID, "name": c.Name, "arguments": c.Arguments, "display": c.Display})
		}
		for _, res := range m.ToolResults {
			r.emit(threadID, EventToolResult, resultEvent(res))
		}
	}
}

func resultEvent(res store.ToolResult) map[string]any {
	return map[string]any{"call_id": res.CallID, "name": res.Name, "text": res.Text, "content": res.Content,
		"display_as": res.DisplayAs, "is_error": res.IsError}
}

// deltaStream forwards text deltas to the thread's subscribers.
type deltaStream struct {
	r        *Runtime
	threadID string
}

// TextDelta implements model.Stream.
func (d deltaStream) TextDelta(text string) {
	d.r.emit(d.threadID, EventTextDelta, map[string]string{"text": text})
}

// ErrSliceFailed is returned (wrapped) by Idle when the thread's last
// slice failed and its inputs stay queued until the next message.
var ErrSliceFailed = errors.New("the thread's last slice failed; its inputs stay queued until the next message")
