package rap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/google/uuid"
)

// AddSubscription adds a subscription tool (RAP SU-1): a tool whose call
// is confirmed at once and then produces events over time. The input
// schema is inferred from In as for AddTool.
//
// For each valid invocation the server stores a SubscriptionRecord
// (durably when ServerOptions.Store is set), sends the confirming
// tool_result with subscription: true whose text names the subscription
// id (the invocation id, which cancel_subscription takes), and then runs
// h in the background. h emits events with sub.Emit, sub.EmitAssociative
// and sub.Final, and saves a resume cursor with sub.SaveState.
//
// h's ctx is cancelled by POST /cancel_tool_call for the subscription, by
// POST /close_thread for its thread, by the runtime answering one of its
// events 410 Gone (ErrSubscriptionGone), and by Server.Shutdown;
// context.Cause(ctx) tells which. After a cancel, a thread closure or a
// 410 the record is deleted and nothing more is sent (RAP SU-4). After a
// shutdown the record stays stored, and the next Start calls h again with
// sub.Resumed() true: that is the resume hook, and h should pick up from
// sub.State().
//
// When h returns on its own the record is deleted; if it has not sent
// Final, the server sends a final event for it (with the error text, if h
// failed), so that the runtime stops tracking the subscription. After
// Final the record is deleted at once.
//
// With the option ConfirmInHandler, h runs before the confirmation
// instead, so that it can set up (open a watcher, start a process) and
// turn a setup failure into an ordinary error result: see
// ConfirmInHandler and Subscription.Confirm.
//
// AddSubscription panics under the same conditions as AddTool.
func AddSubscription[In any](s *Server, t *Tool, h SubscriptionHandler[In], opts ...SubscriptionOption) {
	if h == nil {
		panic("rap: AddSubscription: nil handler for tool " + toolName(t))
	}
	var cfg subscriptionConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	e := newEntry[In](t)
	e.confirmInHandler = cfg.confirmInHandler
	e.prepare = func(args json.RawMessage) (func(context.Context, *Subscription) error, error) {
		in, err := decodeArgs[In](args)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, sub *Subscription) error { return h(ctx, sub, in) }, nil
	}
	s.addEntry(e)
}

// SubscriptionOption configures a subscription tool added with
// AddSubscription.
type SubscriptionOption func(*subscriptionConfig)

type subscriptionConfig struct {
	confirmInHandler bool
}

// ConfirmInHandler makes the handler confirm the subscription itself. The
// handler then runs before the confirming tool_result is sent: it sets up
// what it needs (a file watcher, a process, a connection) and calls
// sub.Confirm once it is ready, so that no change made right after the
// confirmation is missed. The first Emit, EmitAssociative or Final
// confirms too, if Confirm was not called.
//
// If the handler returns an error, panics, or is cancelled before it
// confirms, the call ends in an ordinary "Error: …" tool_result
// (RAP IN-4, RE-4) and no subscription is stored or resumed. If it
// returns nil without confirming, the subscription is confirmed and at
// once ended with a final event. The record is stored (SU-1) when the
// subscription is confirmed; a resumed handler is already confirmed.
func ConfirmInHandler() SubscriptionOption {
	return func(c *subscriptionConfig) { c.confirmInHandler = true }
}

// Subscription is one active subscription, handed to the handler added
// with AddSubscription. Its methods are safe for concurrent use.
type Subscription struct {
	srv     *Server
	inv     Invocation
	resumed bool
	ctx     context.Context // the subscription's lifetime
	call    *Call           // the subscribing call; nil when resumed

	mu        sync.Mutex // serialises sends, so events keep their order
	rec       SubscriptionRecord
	confirmed bool // the record is stored and the confirming result sent
	failed    bool // the call ended in an error result before confirming
	final     bool // Final was sent
	gone      bool // the record was deleted; SaveState must not bring it back
}

// Confirm stores the subscription's record and sends the confirming
// tool_result with subscription: true (RAP SU-1). Without the option
// ConfirmInHandler the server has done so before the handler runs, and
// Confirm does nothing; with it, the handler calls Confirm once its setup
// succeeded. Calling it again does nothing. If storing the record fails,
// Confirm returns the error and sends nothing: the handler should return
// it, and the call then ends in an error result.
func (s *Subscription) Confirm(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmLocked(ctx)
}

// confirmLocked is Confirm with s.mu held.
func (s *Subscription) confirmLocked(ctx context.Context) error {
	switch {
	case s.confirmed:
		return nil
	case s.failed:
		return fmt.Errorf("rap: subscription %s cannot be confirmed: its call already ended in an error result; stop the handler", s.inv.ID)
	case s.ctx.Err() != nil:
		return fmt.Errorf("rap: subscription %s cannot be confirmed: %w", s.inv.ID, context.Cause(s.ctx))
	}
	inv := &s.inv
	if err := s.srv.subs.SaveSubscription(ctx, s.rec); err != nil {
		s.srv.log.Error("rap: could not store a subscription", "toolset", s.srv.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", err)
		return &subscriptionStoreError{op: inv.Operation, err: err}
	}
	s.confirmed = true
	// RAP SU-1: confirm with subscription: true, naming the id.
	s.call.finish(s.srv.deliverCtx, &ToolResult{
		Subscription: true,
		Text: fmt.Sprintf("Subscribed (%s). Subscription ID: %s. Events will arrive as they happen; to stop them, cancel the subscription with tool_call_id %q.",
			inv.Operation, inv.ID, inv.ID),
	})
	return nil
}

// ID returns the subscription id: the id of the invocation that created
// it, which every event carries as tool_call_id (RAP SU-2) and which the
// runtime's cancel_subscription names.
func (s *Subscription) ID() string { return s.inv.ID }

// Resumed reports whether the handler runs again after a server restart
// rather than right after the subscribing call.
func (s *Subscription) Resumed() bool { return s.resumed }

// Invocation returns a copy of the call that created the subscription.
func (s *Subscription) Invocation() *Invocation {
	inv := s.inv
	inv.Arguments = append(json.RawMessage(nil), s.inv.Arguments...)
	inv.ThreadAncestors = append([]string(nil), s.inv.ThreadAncestors...)
	return &inv
}

// State returns the state last saved with SaveState (nil if none): a
// cursor the handler uses to resume where it stopped.
func (s *Subscription) State() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(json.RawMessage(nil), s.rec.State...)
}

// subscriptionStoreError is Confirm's error when the record could not be
// stored. Its text is a complete error result without the store's
// internals (RAP RE-4), which the server has logged; Unwrap gives them.
type subscriptionStoreError struct {
	op  string
	err error
}

func (e *subscriptionStoreError) Error() string {
	return fmt.Sprintf("Error: %q could not start: the tool server failed to store the subscription. Try again in a moment.", e.op)
}

func (e *subscriptionStoreError) Unwrap() error { return e.err }

// SaveState stores state (any JSON value) with the subscription's record,
// durably when the server has a Store, so that a resumed handler can read
// it with State.
func (s *Subscription) SaveState(ctx context.Context, state json.RawMessage) error {
	if !json.Valid(state) {
		return fmt.Errorf("rap: subscription %s: SaveState: state is not valid JSON; pass a JSON value such as {\"cursor\":42}", s.inv.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || s.final || s.failed {
		return fmt.Errorf("rap: subscription %s: SaveState: the subscription has ended; stop the handler", s.inv.ID)
	}
	rec := s.rec
	rec.State = append(json.RawMessage(nil), state...)
	if !s.confirmed {
		// Stored with the record when the subscription is confirmed.
		s.rec = rec
		return nil
	}
	if err := s.srv.subs.SaveSubscription(ctx, rec); err != nil {
		return fmt.Errorf("rap: subscription %s: SaveState: storing the record: %w", s.inv.ID, err)
	}
	s.rec = rec
	return nil
}

// Emit sends a threaded event: the runtime handles it in a child thread of
// the subscribing thread (RAP SU-2, SU-6). text should be JSON. The event
// gets an EventID, the same on every redelivery. An event larger than
// MaxCallbackBytes is not sent and Emit returns an error; emit a link to
// large data instead.
func (s *Subscription) Emit(ctx context.Context, text string) error {
	return s.send(ctx, text, false, false)
}

// EmitAssociative sends an event that the runtime injects inline in the
// subscribing thread (RAP SU-6), for updates of an ongoing operation.
func (s *Subscription) EmitAssociative(ctx context.Context, text string) error {
	return s.send(ctx, text, true, false)
}

// Final sends the last event, with final: true, and deletes the record
// (RAP SU-4). Nothing can be emitted after it; the handler should return.
func (s *Subscription) Final(ctx context.Context, text string, associative bool) error {
	return s.send(ctx, text, associative, true)
}

func (s *Subscription) send(ctx context.Context, text string, associative, final bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.final {
		return fmt.Errorf("rap: subscription %s already sent its final event; nothing can be emitted after it (RAP SU-4)", s.inv.ID)
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("rap: subscription %s cannot emit, it has been stopped (return from the handler): %w", s.inv.ID, context.Cause(s.ctx))
	}
	if err := s.confirmLocked(ctx); err != nil {
		return err
	}
	// The event id is fixed here, before the event is queued: every
	// retry and every redelivery after a restart carries the same one.
	ev := &SubscriptionEvent{GroupID: s.inv.GroupID, ToolCallID: s.inv.ID, Text: text, Associative: associative, Final: final, EventID: uuid.NewString()}
	if err := s.srv.sender.Send(ctx, s.inv.CallbackURL, ev); err != nil {
		return fmt.Errorf("rap: subscription %s: sending event: %w", s.inv.ID, err)
	}
	if final {
		s.final = true
		s.deleteLocked(ctx)
	}
	return nil
}

// deleteLocked forgets the record. s.mu must be held.
func (s *Subscription) deleteLocked(ctx context.Context) {
	if s.gone {
		return
	}
	s.gone = true
	if err := s.srv.subs.DeleteSubscription(context.WithoutCancel(ctx), s.inv.GroupID, s.inv.ID); err != nil {
		s.srv.log.Error("rap: could not delete a subscription record; it will resume at the next start",
			"toolset", s.srv.name, "group_id", s.inv.GroupID, "id", s.inv.ID, "error", err)
	}
}

// startSubscription starts a subscription's handler, confirming the
// subscription first unless the tool confirms in its handler. It reports
// whether it took over ctx and the call's registration (false when it
// answered with an error result, or left the call to the next Start).
func (s *Server) startSubscription(ctx context.Context, cancel context.CancelCauseFunc, c *Call, e *toolEntry) bool {
	inv := c.Invocation
	run, err := e.prepare(inv.Arguments)
	if err != nil {
		c.finish(s.deliverCtx, &ToolResult{Text: handlerErrorText(inv.Operation, err, nil)})
		return false
	}
	if !s.takeSubscriptionSlot(false) {
		s.log.Warn("rap: subscription refused: the server is at its limit", "toolset", s.name, "operation", inv.Operation,
			"group_id", inv.GroupID, "id", inv.ID, "max_subscriptions", s.opts.MaxSubscriptions)
		c.finish(s.deliverCtx, errorResult(fmt.Sprintf(
			"%q cannot start: the tool server already runs its limit of %d subscriptions. Cancel a subscription that is no longer needed, or try again later.",
			inv.Operation, s.opts.MaxSubscriptions)))
		return false
	}
	rec := SubscriptionRecord{Invocation: *inv, Created: time.Now().UTC()}
	sub := &Subscription{srv: s, inv: *inv, ctx: ctx, call: c, rec: rec}
	if !e.confirmInHandler {
		if err := sub.Confirm(ctx); err != nil {
			// The store failed, or the call was cancelled before it
			// could be confirmed: one error result either way (RAP IN-4).
			s.releaseSubscriptionSlot()
			c.finish(s.deliverCtx, &ToolResult{Text: handlerErrorText(inv.Operation, err, context.Cause(ctx))})
			return false
		}
	}
	if !s.goSubscription(sub, run, cancel) {
		s.releaseSubscriptionSlot()
		sub.mu.Lock()
		defer sub.mu.Unlock()
		if !sub.confirmed {
			// Shutting down before the handler could set up: end the
			// call like any unfinished call (RAP IN-4).
			sub.failed = true
			c.finish(s.deliverCtx, &ToolResult{Text: handlerErrorText(inv.Operation, ErrServerShutdown, ErrServerShutdown)})
		}
		// A confirmed record stays stored and the next Start resumes it.
		return false
	}
	return true
}

// takeSubscriptionSlot counts one more running subscription. Unless
// always is set it refuses (false) when MaxSubscriptions are running.
func (s *Server) takeSubscriptionSlot(always bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !always && s.nsubs >= s.opts.MaxSubscriptions {
		return false
	}
	s.nsubs++
	return true
}

// releaseSubscriptionSlot gives back a slot taken by takeSubscriptionSlot.
func (s *Server) releaseSubscriptionSlot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nsubs--
}

// goSubscription runs a subscription handler in the background unless the
// server is shutting down.
func (s *Server) goSubscription(sub *Subscription, run func(context.Context, *Subscription) error, cancel context.CancelCauseFunc) bool {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	s.subsWG.Add(1)
	s.mu.Unlock()
	go s.runSubscription(sub, run, cancel)
	return true
}

func (s *Server) runSubscription(sub *Subscription, run func(context.Context, *Subscription) error, cancel context.CancelCauseFunc) {
	defer s.subsWG.Done()
	defer s.releaseSubscriptionSlot()
	inv := &sub.inv
	defer func() {
		s.unregister(inv.GroupID, inv.ID)
		cancel(nil)
	}()
	err := s.callSubscription(sub, run)
	cause := context.Cause(sub.ctx)
	sub.mu.Lock()
	if !sub.confirmed && err == nil && sub.ctx.Err() == nil {
		// Returned nil without confirming: confirm, then end it below
		// with a final event. If even that fails, the call gets an error
		// result instead.
		err = sub.confirmLocked(s.deliverCtx)
	}
	if !sub.confirmed && (err != nil || sub.ctx.Err() != nil) {
		// The handler failed, panicked or was stopped during its setup:
		// the call ends in an ordinary error result and nothing was
		// stored (RAP IN-4, RE-4).
		sub.failed = true
		sub.mu.Unlock()
		if err == nil {
			err = cause
		}
		s.log.Info("rap: subscription did not start", "toolset", s.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", err)
		sub.call.finish(s.deliverCtx, &ToolResult{Text: handlerErrorText(inv.Operation, err, cause)})
		return
	}
	sub.mu.Unlock()
	switch {
	case sub.ctx.Err() != nil && errors.Is(cause, ErrServerShutdown):
		// Keep the record: the next Start resumes it.
		s.log.Info("rap: subscription paused for shutdown", "toolset", s.name, "group_id", inv.GroupID, "id", inv.ID)
		return
	case sub.ctx.Err() != nil:
		// Cancelled or thread closed: forget it and send nothing more
		// (RAP SU-4, CA-2, TC-2).
		sub.mu.Lock()
		sub.deleteLocked(s.baseCtx)
		sub.mu.Unlock()
		s.log.Info("rap: subscription ended by the runtime", "toolset", s.name, "group_id", inv.GroupID, "id", inv.ID, "cause", cause)
		return
	}
	sub.mu.Lock()
	final := sub.final
	sub.mu.Unlock()
	if !final {
		text := fmt.Sprintf(`{"subscription":%q,"status":"ended"}`, inv.ID)
		if err != nil {
			text = handlerErrorText(inv.Operation, err, nil)
			s.log.Warn("rap: subscription handler failed", "toolset", s.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", err)
		}
		if ferr := sub.Final(s.deliverCtx, text, false); ferr != nil {
			s.log.Error("rap: could not send a subscription's final event", "toolset", s.name, "group_id", inv.GroupID, "id", inv.ID, "error", ferr)
		}
	}
	sub.mu.Lock()
	sub.deleteLocked(s.baseCtx)
	sub.mu.Unlock()
}

// callSubscription runs the handler, turning a panic into an error.
func (s *Server) callSubscription(sub *Subscription, run func(context.Context, *Subscription) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("rap: subscription handler panicked",
				"toolset", s.name, "operation", sub.inv.Operation, "group_id", sub.inv.GroupID, "id", sub.inv.ID,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = errors.New("Error: the subscription stopped after an internal failure of the tool server. Subscribe again; if it keeps failing, report it to the tool's maintainers.")
		}
	}()
	return run(sub.ctx, sub)
}

// resumeSubscriptions restarts the handler of every stored subscription
// in recs.
func (s *Server) resumeSubscriptions(ctx context.Context, recs []SubscriptionRecord) {
	for _, rec := range recs {
		inv := rec.Invocation
		e, ok := s.lookup(inv.Operation)
		if !ok || e.prepare == nil {
			s.log.Warn("rap: stored subscription names no subscription tool of this server; left stored",
				"toolset", s.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID)
			continue
		}
		subCtx, cancel := context.WithCancelCause(s.baseCtx)
		sub := &Subscription{srv: s, inv: inv, resumed: true, confirmed: true, ctx: subCtx, rec: rec}
		run, perr := s.safePrepare(e, inv.Arguments)
		if perr == nil {
			perr = e.schema.Validate(inv.Arguments)
		}
		if perr != nil {
			// The tool's schema changed since (RAP TS-10): end it visibly.
			s.log.Warn("rap: stored subscription no longer fits its tool; ending it",
				"toolset", s.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", perr)
			if ferr := sub.Final(ctx, errorText(fmt.Sprintf(
				"the subscription to %q could not resume after a tool server restart: its arguments no longer fit the tool (%v). Subscribe again.", inv.Operation, perr)), false); ferr != nil {
				s.log.Error("rap: could not send a subscription's final event", "toolset", s.name, "group_id", inv.GroupID, "id", inv.ID, "error", ferr)
			}
			sub.mu.Lock()
			sub.deleteLocked(ctx)
			sub.mu.Unlock()
			cancel(nil)
			continue
		}
		if !s.register(inv.GroupID, inv.ID, cancel) {
			cancel(nil)
			continue
		}
		s.takeSubscriptionSlot(true)
		if !s.goSubscription(sub, run, cancel) {
			s.releaseSubscriptionSlot()
			s.unregister(inv.GroupID, inv.ID)
			cancel(nil)
			continue // shutting down: it stays stored for the next Start
		}
		s.log.Info("rap: subscription resumed", "toolset", s.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID)
	}
}

// safePrepare is e.prepare with a panic (in an argument type's
// UnmarshalJSON, say) turned into an error, so that one bad stored record
// cannot crash every Start.
func (s *Server) safePrepare(e *toolEntry, args json.RawMessage) (run func(context.Context, *Subscription) error, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("rap: decoding a stored subscription's arguments panicked", "toolset", s.name, "operation", e.tool.Name,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			run, err = nil, errors.New("decoding them failed inside the tool server")
		}
	}()
	return e.prepare(args)
}

// memorySubscriptions is the SubscriptionStore of a server without a
// Store: records live as long as the process.
type memorySubscriptions struct {
	mu   sync.Mutex
	recs map[[2]string]SubscriptionRecord
}

func newMemorySubscriptions() *memorySubscriptions {
	return &memorySubscriptions{recs: map[[2]string]SubscriptionRecord{}}
}

func (m *memorySubscriptions) SaveSubscription(_ context.Context, r SubscriptionRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[[2]string{r.Invocation.GroupID, r.Invocation.ID}] = r
	return nil
}

func (m *memorySubscriptions) DeleteSubscription(_ context.Context, groupID, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, [2]string{groupID, id})
	return nil
}

func (m *memorySubscriptions) ListSubscriptions(context.Context) ([]SubscriptionRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SubscriptionRecord, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r)
	}
	return out, nil
}
