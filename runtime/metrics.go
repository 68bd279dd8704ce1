package runtime

// This file owns what the runtime tells Config.Metrics: the Metrics
// interface and the names of outcomes it passes, the timing of store
// transactions (timedStore), and the census of the store the metrics read
// when scraped (threads by state, pending calls by age). Package
// runtime/metrics implements Metrics on a Prometheus registry
// (docs/observability.md). Without Config.Metrics none of this runs.

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Metrics receives what the runtime counts (Config.Metrics); package
// runtime/metrics implements it on a Prometheus registry. The runtime
// calls its methods from many goroutines, on hot paths: they must be safe
// for concurrent use, quick, and must not block. Every string it passes
// is one of a small set (the outcome names below) or a model, toolset or
// tool name, never an id of a thread, call or user.
type Metrics interface {
	// Completion is called when a model completion ended.
	Completion(c CompletionStats)
	// Slice is called when a slice of a thread ended (SliceOK,
	// SliceFailed, SliceLost), after took.
	Slice(outcome string, took time.Duration)
	// Invocation is called when the dispatch of a call to its tool server
	// ended (InvocationAccepted, InvocationRefused, InvocationFailed),
	// took after it began (retries included).
	Invocation(toolset, tool, outcome string, took time.Duration)
	// ToolResult is called when a tool's result for a call was accepted
	// (ResultOK, ResultError), took after the call was saved with its
	// turn and dispatched.
	ToolResult(toolset, tool, outcome string, took time.Duration)
	// Callback is called for every callback a tool posted: its message
	// type (rap.MessageType, or CallbackKindUnknown when it could not be
	// read) and the answer (CallbackAccepted, ...).
	Callback(kind, answer string)
	// SubscriptionEvent is called for every subscription event accepted
	// (EventInChildThread, EventInline, EventHeld).
	SubscriptionEvent(handling string)
	// Compaction is called when a thread's history was compacted, by
	// CompactedByGorap or CompactedByProvider, or gorap's compaction failed
	// (outcome OutcomeOK or OutcomeError).
	Compaction(by, outcome string)
	// SessionMove is called when a session moved out (MoveDirectionOut:
	// MoveDone or MoveFailed) or in (MoveDirectionIn: MoveDone or
	// MoveAborted).
	SessionMove(direction, outcome string)
	// StoreTx is called when a store transaction ended (TxUpdate, TxView,
	// TxQuickView): it took took, its function ran attempts times (more
	// than once when the store retried it after a conflict), and failed
	// says it returned an error.
	StoreTx(kind string, took time.Duration, attempts int, failed bool)
	// Watch is called once, by New, with what the metrics read when they
	// are scraped.
	Watch(w Watched)
}

// CompletionStats is what Metrics.Completion is told of one completion.
type CompletionStats struct {
	// Model is the provider's name of the model, such as
	// "anthropic:claude-sonnet-4-5".
	Model string
	// Purpose is PurposeTurn (a thread's turn) or PurposeCompaction (a
	// summary written by gorap's compaction).
	Purpose string
	// Outcome is CompletionOK or why it failed (CompletionError, ...).
	Outcome string
	// Took is the completion's duration.
	Took time.Duration
	// Usage is its token usage as the provider reported it (zero when it
	// failed or reports none).
	Usage model.Usage
	// Cost is what Usage cost in US dollars at the runtime's prices
	// (Config.Prices over the known list prices); Priced is false when
	// the model's price is not known.
	Cost   float64
	Priced bool
}

// Names Metrics is passed.
const (
	// Completion purposes and outcomes.
	PurposeTurn             = "turn"
	PurposeCompaction       = "compaction"
	CompletionOK            = "ok"
	CompletionError         = "error"
	CompletionPromptTooLong = "prompt_too_long"
	CompletionIdleTimeout   = "idle_timeout"
	CompletionTimeout       = "timeout"
	CompletionCancelled     = "cancelled"
	SliceOK                 = "ok"
	SliceFailed             = "failed"
	SliceLost               = "lost"
	InvocationAccepted      = "accepted"
	InvocationRefused       = "refused"
	InvocationFailed        = "failed"
	ResultOK                = "ok"
	ResultError             = "error"
	CallbackKindUnknown     = "unknown"
	CallbackAccepted        = "accepted"
	CallbackDuplicate       = "duplicate"
	CallbackIgnored         = "ignored"
	CallbackInvalid         = "invalid"
	CallbackForbidden       = "forbidden"
	CallbackUnknownCall     = "unknown_call"
	CallbackGone            = "gone"
	CallbackDeferred        = "deferred"
	CallbackFailed          = "failed"
	EventInChildThread      = "child_thread"
	EventInline             = "inline"
	EventHeld               = "held"
	CompactedByGorap        = "gorap"
	CompactedByProvider     = "provider"
	OutcomeOK               = "ok"
	OutcomeError            = "error"
	MoveDirectionOut        = "out"
	MoveDirectionIn         = "in"
	MoveDone                = "moved"
	MoveFailed              = "failed"
	MoveAborted             = "aborted"
	TxUpdate                = "update"
	TxView                  = "view"
	TxQuickView             = "quick_view"
)

// Watched is what the metrics read when they are scraped.
type Watched struct {
	// EventStreams returns the number of client event streams open in
	// this process.
	EventStreams func() int
	// Census counts the store's threads by state and its pending calls by
	// age (see Census). exported is false when another process sharing
	// the store exports these gauges: this one must not, or sums would
	// count the store twice.
	Census func(ctx context.Context) (c Census, exported bool, err error)
}

// Census counts a whole store at one moment.
type Census struct {
	// Threads counts the threads by state. Each thread is counted once,
	// by its own state: a parent waiting only on its child threads is
	// api.StateWaitingChildren, and each child is counted in its own
	// state. Nil when the store cannot count them (store.Censuses).
	Threads map[api.ThreadState]int64
	// Ages are the ages PendingCalls and WaitingThreads count from:
	// PendingCalls[i] is the number of tool calls waiting on a tool
	// server (not the built-in tools) made at least Ages[i] ago, and
	// WaitingThreads[i] the number of threads with such a call.
	Ages           []time.Duration
	PendingCalls   []int64
	WaitingThreads []int64
}

// CensusAges are the ages Census counts pending calls from.
var CensusAges = []time.Duration{0, time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour}

// census counts the store for the metrics: nothing (exported false) when
// another process sharing the store exports the store-wide gauges.
func (r *Runtime) census(ctx context.Context) (Census, bool, error) {
	exported, err := r.coord.exportsStoreGauges(ctx)
	if err != nil || !exported {
		return Census{}, false, err
	}
	// The threads whose last slice failed for good in this process: the
	// store knows their input is queued, not that it waits for a message.
	r.mu.Lock()
	var failed []string
	for id := range r.failed {
		if len(failed) == maxCensusFailed {
			break
		}
		failed = append(failed, id)
	}
	r.mu.Unlock()
	q := store.CensusQuery{Now: time.Now().UTC(), RetryTimerKind: timerModelRetry, SleepTimerKind: timerSleep,
		AuthKeyPrefix: oauthKeyPrefix, LocalToolset: builtinToolset, Ages: CensusAges}
	var out Census
	err = r.store.View(ctx, func(tx store.Tx) error {
		cs, ok := tx.(store.Censuses)
		if !ok {
			out = Census{}
			return nil
		}
		c, err := cs.Census(q)
		if err != nil {
			return err
		}
		out = Census{Threads: map[api.ThreadState]int64{api.StateClosed: c.Closed}, Ages: CensusAges,
			PendingCalls: c.PendingCalls, WaitingThreads: c.WaitingThreads}
		for f, n := range c.Open {
			out.Threads[censusState(f)] += n
		}
		for _, id := range failed {
			if r.moves.paused(id) {
				continue
			}
			running, err := queuedWithoutRetry(tx, id)
			if err != nil {
				return err
			}
			if running && out.Threads[api.StateRunning] > 0 {
				out.Threads[api.StateRunning]--
				out.Threads[api.StateFailed]++
			}
		}
		return nil
	})
	if err != nil {
		return Census{}, true, err
	}
	return out, true, nil
}

// maxCensusFailed bounds the threads failed in this process that a census
// looks at one by one.
const maxCensusFailed = 100

// censusState is the state of a thread with facts f, in the order of
// ownState's tests (threadstate.go).
func censusState(f store.ThreadFacts) api.ThreadState {
	switch {
	case f.Moving:
		return api.StateMoving
	case f.Queued && f.Retrying:
		return api.StateFailed
	case f.Queued:
		return api.StateRunning
	case f.Asking:
		return api.StateWaitingUser
	case f.Tools:
		return api.StateWaitingTools
	case f.Sleeping:
		return api.StateWaitingTimer
	case f.BusyBelow:
		return api.StateWaitingChildren
	}
	return api.StateQuiet
}

// queuedWithoutRetry reports whether the thread is open and has queued
// input but no retry timer: what a census counts as running.
func queuedWithoutRetry(tx store.Tx, id string) (bool, error) {
	th, err := tx.Thread(id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil || th.Status == store.ThreadClosed {
		return false, err
	}
	queued, err := tx.Queued(id)
	if err != nil || len(queued) == 0 {
		return false, err
	}
	timers, err := tx.ThreadTimers(id)
	if err != nil {
		return false, err
	}
	for _, t := range timers {
		if t.Kind == timerModelRetry {
			return false, nil
		}
	}
	return true, nil
}

// watched is what New gives Config.Metrics to read when scraped.
func (r *Runtime) watched() Watched {
	return Watched{
		EventStreams: func() int {
			r.hub.mu.Lock()
			defer r.hub.mu.Unlock()
			return r.hub.total
		},
		Census: r.census,
	}
}

// completionOutcome names why a completion failed (nil: CompletionOK).
func completionOutcome(err error) string {
	switch {
	case err == nil:
		return CompletionOK
	case model.IsPromptTooLong(err):
		return CompletionPromptTooLong
	case errors.Is(err, ErrModelIdle):
		return CompletionIdleTimeout
	case errors.Is(err, ErrModelTimeout):
		return CompletionTimeout
	case errors.Is(err, context.Canceled):
		return CompletionCancelled
	}
	return CompletionError
}

// observeCompletion tells the metrics of a completion of the runtime's
// model that began at start.
func (r *Runtime) observeCompletion(purpose string, start time.Time, u model.Usage, err error) {
	name := r.model.Name()
	s := CompletionStats{Model: name, Purpose: purpose, Outcome: completionOutcome(err), Took: time.Since(start), Usage: u}
	if p, ok := r.prices.Of(name); ok {
		s.Cost, s.Priced = p.Cost(u), true
	}
	r.metrics.Completion(s)
}

// callbackAnswer names the answer a callback got.
func callbackAnswer(res api.CallbackResult) string {
	switch {
	case res.Status == 200 && res.Message == "duplicate":
		return CallbackDuplicate
	case res.Status == 200 && strings.HasPrefix(res.Message, "ignored"):
		return CallbackIgnored
	case res.Status >= 200 && res.Status < 300:
		return CallbackAccepted
	case res.Status == 400 || res.Status == 413:
		return CallbackInvalid
	case res.Status == 403:
		return CallbackForbidden
	case res.Status == 404:
		return CallbackUnknownCall
	case res.Status == 410:
		return CallbackGone
	case res.Status == 503:
		return CallbackDeferred
	}
	return CallbackFailed
}

// eventHandling names how an accepted subscription event was handled,
// from the answer applyEvent gave it.
func eventHandling(msg string) string {
	switch {
	case strings.Contains(msg, "child thread"):
		return EventInChildThread
	case strings.Contains(msg, "held"):
		return EventHeld
	}
	return EventInline
}

// timedStore is the store with each transaction timed for Config.Metrics.
// The optional interfaces of a store (store.Shared, the listeners) are
// asked of Config.Store, never of it: it has only store.Store's methods.
type timedStore struct {
	store.Store
	m Metrics
}

// timed runs fn in the store's transaction of kind and tells the
// metrics. Counting the runs costs the closure one allocation, next to
// the store's own for the transaction; a pool of counters would save it
// but rely on no store running fn after it returned.
func (s timedStore) timed(ctx context.Context, kind string, fn func(store.Tx) error) error {
	run := s.Store.QuickView
	switch kind {
	case TxUpdate:
		run = s.Store.Update
	case TxView:
		run = s.Store.View
	}
	return s.timedRun(ctx, kind, run, fn)
}

// timedRun runs fn through run (one of the store's ways to run a
// transaction), counted as kind.
func (s timedStore) timedRun(ctx context.Context, kind string, run func(context.Context, func(store.Tx) error) error, fn func(store.Tx) error) error {
	runs := 0
	counted := func(tx store.Tx) error {
		runs++
		return fn(tx)
	}
	start := time.Now()
	err := run(ctx, counted)
	s.m.StoreTx(kind, time.Since(start), runs, err != nil)
	return err
}

// Update implements store.Store.
func (s timedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.timed(ctx, TxUpdate, fn)
}

// View implements store.Store.
func (s timedStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.timed(ctx, TxView, fn)
}

// QuickView implements store.Store.
func (s timedStore) QuickView(ctx context.Context, fn func(store.Tx) error) error {
	return s.timed(ctx, TxQuickView, fn)
}

// observeSlice tells the metrics of a slice that began at start.
func (r *Runtime) observeSlice(start time.Time, err error, lost bool) {
	outcome := SliceOK
	switch {
	case lost:
		outcome = SliceLost
	case err != nil:
		outcome = SliceFailed
	}
	r.metrics.Slice(outcome, time.Since(start))
}

// invocationOutcome names how a dispatch ended: accepted, refused by the
// tool server (a 4xx answer), or failed (no answer, a 5xx after the
// retries, or an invocation that could not be built).
func invocationOutcome(status int, err error) string {
	switch {
	case err == nil:
		return InvocationAccepted
	case status >= 400 && status < 500:
		return InvocationRefused
	}
	return InvocationFailed
}

// observeResult tells the metrics of a tool's result accepted for call.
func (r *Runtime) observeResult(call store.Call, isError bool) {
	if r.metrics == nil {
		return
	}
	outcome := ResultOK
	if isError {
		outcome = ResultError
	}
	r.metrics.ToolResult(call.Toolset, call.ToolName, outcome, time.Since(call.Created))
}

// observeCallback tells the metrics of a callback of type kind and its
// answer, and of the subscription event it brought.
func (r *Runtime) observeCallback(kind string, res api.CallbackResult) {
	answer := callbackAnswer(res)
	r.metrics.Callback(kind, answer)
	if kind == string(rap.TypeSubscriptionEvent) && answer == CallbackAccepted {
		r.metrics.SubscriptionEvent(eventHandling(res.Message))
	}
}

// observeCompaction tells the metrics of a compaction.
func (r *Runtime) observeCompaction(by, outcome string) {
	if r.metrics != nil {
		r.metrics.Compaction(by, outcome)
	}
}

// observeMove tells the metrics of a move that ended: MoveDone when done,
// else outcome.
func (r *Runtime) observeMove(direction string, done bool, outcome string) {
	if r.metrics == nil {
		return
	}
	if done {
		outcome = MoveDone
	}
	r.metrics.SessionMove(direction, outcome)
}
