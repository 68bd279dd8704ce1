package runtime

// This file owns calling the model: a completion bounded in time, its text
// deltas to clients, and the durable retry of a failed completion.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Model calls: every completion runs under an
// idle timeout between stream events and an overall limit, so a hung
// provider never holds its thread; a failed completion is retried on its
// own, with backoff, through a durable timer, while its inputs stay queued
// (RAP RT-4); and errors are stripped of every configured secret before
// they reach logs or clients.

// Defaults of the model call limits.
const (
	// DefaultModelIdleTimeout is Config.ModelIdleTimeout when zero.
	DefaultModelIdleTimeout = 60 * time.Second
	// DefaultModelTimeout is Config.ModelTimeout when zero.
	DefaultModelTimeout = 10 * time.Minute
)

// ErrModelIdle is wrapped by the error of a completion cut because its
// stream sent nothing for Config.ModelIdleTimeout.
var ErrModelIdle = errors.New("the model's answer stream sent nothing for too long")

// ErrModelTimeout is wrapped by the error of a completion cut because it
// ran longer than Config.ModelTimeout.
var ErrModelTimeout = errors.New("the model's answer took too long")

// ModelRetryPolicy sets how the runtime retries a failed completion on its
// own. The thread's inputs stay queued meanwhile (RAP RT-4) and the retry
// waits on a durable timer, so it survives a restart. The n-th retry waits
// min(Max, Initial·2ⁿ⁻¹). A new user message starts the count again.
type ModelRetryPolicy struct {
	// Initial is the first backoff; zero means 5 s.
	Initial time.Duration
	// Max caps each backoff; zero means 2 min.
	Max time.Duration
	// Attempts is the number of completions tried for the same inputs,
	// the first included; zero means 5, and 1 turns automatic retries off.
	// After the last one the thread reports the error to clients (an
	// "error" event with "final": true) and waits for the next message.
	Attempts int
}

func (p ModelRetryPolicy) withDefaults() ModelRetryPolicy {
	if p.Initial <= 0 {
		p.Initial = 5 * time.Second
	}
	if p.Max <= 0 {
		p.Max = 2 * time.Minute
	}
	if p.Attempts <= 0 {
		p.Attempts = 5
	}
	return p
}

// backoff is the wait before the attempt after attempt n (n ≥ 1).
func (p ModelRetryPolicy) backoff(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

func (r *Runtime) modelIdleTimeout() time.Duration {
	switch d := r.cfg.ModelIdleTimeout; {
	case d == 0:
		return DefaultModelIdleTimeout
	case d < 0:
		return 0
	default:
		return d
	}
}

func (r *Runtime) modelTimeout() time.Duration {
	switch d := r.cfg.ModelTimeout; {
	case d == 0:
		return DefaultModelTimeout
	case d < 0:
		return 0
	default:
		return d
	}
}

// modelTimeoutCause is the cause of a completion cut by the model timeout
// of the given length. It is formatted only when read: every completion
// sets one, and almost none is cut.
type modelTimeoutCause time.Duration

func (c modelTimeoutCause) Error() string {
	return fmt.Sprintf("%v: no complete answer within %v (the runtime's model timeout)", ErrModelTimeout, time.Duration(c))
}

func (c modelTimeoutCause) Unwrap() error { return ErrModelTimeout }

// redact masks every configured secret in text.
func (r *Runtime) redact(text string) string { return model.Redact(text, r.cfg.Secrets...) }

// complete runs one completion of the thread under the idle timeout and
// the overall limit, forwarding text deltas to the thread's subscribers.
// Its error never holds a configured secret.
//
// On a shared store it sends nothing once the thread's lease is lost, and
// a completion streaming when it is lost is cut (coord.bounded).
func (r *Runtime) complete(ctx context.Context, threadID string, req model.Request) (*model.Response, error) {
	ctx, unhold := r.coord.bounded(ctx)
	defer unhold()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if limit := r.modelTimeout(); limit > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, limit, modelTimeoutCause(limit))
		defer stop()
	}
	s := &watchedStream{deltaStream: deltaStream{r: r, threadID: threadID}}
	if idle := r.modelIdleTimeout(); idle > 0 {
		s.idle = idle
		s.timer = time.AfterFunc(idle, func() {
			cancel(fmt.Errorf("%w: nothing arrived for %v (the runtime's model idle timeout)", ErrModelIdle, idle))
		})
		defer s.timer.Stop()
	}
	r.coord.completionStarted(ctx, threadID)
	if err := r.coord.held(ctx); err != nil {
		// The last look before the request is sent: a process that stalled
		// past its lease sends nothing.
		r.coord.completionEnded(threadID, false)
		return nil, err
	}
	var start time.Time
	if r.metrics != nil {
		start = time.Now()
	}
	ctx, span := r.startCompletion(ctx) // tracing.go
	resp, err := r.model.Complete(ctx, req, s)
	// The last deltas go to other processes before the turn is announced.
	r.coord.completionEnded(threadID, err == nil && resp != nil)
	if err == nil && resp == nil {
		err = errors.New("the provider returned no answer and no error")
	}
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrModelIdle) || errors.Is(cause, ErrModelTimeout) {
			err = fmt.Errorf("%w (%w)", cause, err)
		}
		r.endCompletion(span, nil, err)
		if r.metrics != nil {
			r.observeCompletion(PurposeTurn, start, model.Usage{}, err)
		}
		return nil, model.RedactError(err, r.cfg.Secrets...)
	}
	r.endCompletion(span, resp, nil)
	if r.metrics != nil {
		r.observeCompletion(PurposeTurn, start, resp.Usage, nil)
	}
	return resp, nil
}

// watchedStream forwards deltas and restarts the idle timer on every
// event the provider receives (model.ActivityStream). A provider that
// reports no activity restarts it with each text delta only.
type watchedStream struct {
	deltaStream
	idle  time.Duration
	timer *time.Timer
}

func (w *watchedStream) touch() {
	if w.timer != nil {
		w.timer.Reset(w.idle)
	}
}

// TextDelta implements model.Stream.
func (w *watchedStream) TextDelta(text string) {
	w.touch()
	w.deltaStream.TextDelta(text)
}

// Activity implements model.ActivityStream.
func (w *watchedStream) Activity() { w.touch() }

// Automatic retries.

// timerModelRetry is the Kind of the timer that retries a thread's failed
// completion; a thread has at most one (modelRetryTimerID).
const timerModelRetry = "model_retry"

func modelRetryTimerID(threadID string) string { return "model-retry:" + threadID }

// retryTimers knows which threads may have a model retry timer in the
// store, so that saving a turn deletes the timer only where there can be
// one: a statement fewer in almost every cycle. Until
// Start has loaded the timers left by an earlier run, every thread may.
type retryTimers struct {
	mu      sync.Mutex
	loaded  bool
	threads map[string]bool
}

// mayHave reports whether the thread may have a retry timer.
func (s *retryTimers) mayHave(threadID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.loaded || s.threads[threadID]
}

// arm notes that the thread may have a retry timer from now on; call it
// before storing the timer.
func (s *retryTimers) arm(threadID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.threads == nil {
		s.threads = map[string]bool{}
	}
	s.threads[threadID] = true
}

// disarmed notes that a committed transaction deleted the thread's timer.
func (s *retryTimers) disarmed(threadID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.threads, threadID)
}

// add adds the threads of timers written since load (an imported
// session's).
func (s *retryTimers) add(timers []store.Timer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.threads == nil {
		s.threads = map[string]bool{}
	}
	for _, tm := range timers {
		if tm.Kind == timerModelRetry {
			s.threads[tm.ThreadID] = true
		}
	}
}

// load adds the threads of the stored timers; from then on only armed
// threads may have one.
func (s *retryTimers) load(timers []store.Timer) {
	s.add(timers)
	s.mu.Lock()
	s.loaded = true
	s.mu.Unlock()
}

// reasonModelRetry marks the wake-up inbox row a retry timer leaves.
const reasonModelRetry = "model_retry"

// retryMarker is the payload of a retry timer and of the KindWake inbox row
// it leaves when it fires. The row stays queued with the inputs it retries
// until a completion succeeds, so the attempt count survives restarts.
type retryMarker struct {
	Reason string `json:"reason"`
	// Attempt is the number of the attempt this wake-up starts (2 or more).
	Attempt int `json:"attempt"`
	// Resume is true when the failed slice had already saved its inputs:
	// the retry then asks for a completion without new input.
	Resume bool `json:"resume,omitempty"`
	// Error is why the completion failed (at most maxLastErrorBytes), for
	// the waiting lists of every process sharing the store.
	Error string `json:"error,omitempty"`
}

// wakeAsksCompletion reports whether a KindWake row asks for a completion
// by itself. A retry marker of inputs that are still queued does not: they
// ask for it; alone (a completion consumed them meanwhile) it asks nothing.
func wakeAsksCompletion(payload json.RawMessage) bool {
	var m retryMarker
	if json.Unmarshal(payload, &m) != nil || m.Reason != reasonModelRetry {
		return true
	}
	return m.Resume
}

// attemptOf returns the number of the completion attempt a slice over
// items made: 1, or the attempt of the last retry marker after the last
// user message.
func attemptOf(items []store.InboxItem) int {
	n := 1
	for _, it := range items {
		switch it.Kind {
		case store.KindUserMessage:
			n = 1
		case store.KindWake:
			var m retryMarker
			if json.Unmarshal(it.Payload, &m) == nil && m.Reason == reasonModelRetry && m.Attempt > n {
				n = m.Attempt
			}
		}
	}
	return n
}

// modelError is the error of a slice whose completion failed.
type modelError struct {
	model    string
	err      error
	attempt  int
	attempts int
	saved    bool          // the turn before the failure was saved: no input is waiting
	retryIn  time.Duration // zero: no retry is scheduled
}

func (e *modelError) Error() string {
	what := "your message is kept"
	if e.saved {
		what = "the turn before it was saved"
	}
	if e.retryIn > 0 {
		return fmt.Sprintf("model %s failed (attempt %d of %d); %s and the runtime retries in %v on its own (RAP RT-4): %v",
			e.model, e.attempt, e.attempts, what, e.retryIn.Round(time.Millisecond), e.err)
	}
	return fmt.Sprintf("model %s failed (attempt %d of %d, no more automatic retries); %s: send a message to retry (RAP RT-4): %v",
		e.model, e.attempt, e.attempts, what, e.err)
}

func (e *modelError) Unwrap() error { return e.err }

// modelFailed schedules the retry of a failed completion, unless it was
// the last attempt, and returns the slice's error. items are the inbox
// rows the slice read; saved is true when it had already saved them with
// an earlier turn.
func (r *Runtime) modelFailed(ctx context.Context, threadID string, items []store.InboxItem, saved bool, err error) error {
	pol := r.cfg.ModelRetry.withDefaults()
	me := &modelError{model: r.model.Name(), err: err, attempt: 1, attempts: pol.Attempts, saved: saved}
	if !saved {
		me.attempt = attemptOf(items)
	}
	if ctx.Err() != nil || me.attempt >= pol.Attempts {
		return me // shutting down (Start resumes queued inputs), or the last attempt
	}
	delay := pol.backoff(me.attempt)
	payload, _ := json.Marshal(retryMarker{Reason: reasonModelRetry, Attempt: me.attempt + 1, Resume: saved,
		Error: truncateUTF8(err.Error(), maxLastErrorBytes)})
	r.retries.arm(threadID)
	perr := r.store.Update(ctx, func(tx store.Tx) error {
		return tx.PutTimer(store.Timer{ID: modelRetryTimerID(threadID), ThreadID: threadID, Kind: timerModelRetry,
			Payload: payload, Due: time.Now().Add(delay).UTC()})
	})
	if perr != nil {
		r.log.Error("schedule the retry of a failed completion; the next message retries it", "thread", threadID, "err", perr)
		return me
	}
	me.retryIn = delay
	r.kickTimer()
	return me
}

// fireModelRetry handles a due retry timer inside fireTimers' transaction:
// it queues the timer's marker as a wake-up row of the thread, once. It reports whether the thread must be woken.
func (r *Runtime) fireModelRetry(tx store.Tx, tm store.Timer) (bool, error) {
	var m retryMarker
	if err := json.Unmarshal(tm.Payload, &m); err != nil {
		r.log.Error("dropping an undecodable model retry timer", "timer", tm.ID, "err", err)
		return false, nil
	}
	th, err := tx.Thread(tm.ThreadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && th.Status == store.ThreadClosed) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// Dedup keys are remembered for ever, and a later failure may retry an
	// attempt with the same number: the timer's due time tells them apart.
	return tx.Enqueue(store.InboxItem{ThreadID: tm.ThreadID, Kind: store.KindWake, Payload: tm.Payload,
		DedupKey: fmt.Sprintf("model-retry:%s:%d:%d", tm.ThreadID, m.Attempt, tm.Due.UnixNano())})
}

// errorEvent is the data of the "error" event of a failed slice: its
// message, masked, and for a failed completion the
// attempt, the number of attempts, and either the delay before the
// automatic retry (retry_in_ms) or final: true.
func (r *Runtime) errorEvent(err error) api.Error {
	data := api.Error{Message: r.redact(err.Error())}
	var me *modelError
	if errors.As(err, &me) {
		data.Attempt = me.attempt
		data.MaxAttempts = me.attempts
		if me.retryIn > 0 {
			data.RetryInMS = me.retryIn.Milliseconds()
		} else {
			data.Final = true
		}
	}
	return data
}
