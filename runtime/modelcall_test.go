package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/runtime/store"
)

// errorData decodes an "error" event.
type errorData struct {
	Message     string `json:"message"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	RetryInMS   int64  `json:"retry_in_ms"`
	Final       bool   `json:"final"`
}

func nextError(t *testing.T, events <-chan Event) errorData {
	t.Helper()
	ev := waitEvent(t, events, EventError)
	var d errorData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatalf("error event %s: %v", ev.Data, err)
	}
	return d
}

func anthropicAt(t *testing.T, srv *wiretest.Server, key string) model.Provider {
	t.Helper()
	p, err := anthropic.New(&anthropic.Options{APIKey: key, BaseURL: srv.URL, Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A provider whose stream hangs after a few events (here a
// real HTTP server speaking the Anthropic wire format) is cut by the idle
// timeout; the thread is free again, reports the error, and keeps the
// message (RAP RT-4).
func TestModelIdleTimeoutCutsHungStream(t *testing.T) {
	srv := wiretest.NewAnthropic(func(wiretest.Request) wiretest.Reply { return wiretest.Reply{Text: "thinking", Hang: true} })
	defer srv.Close()
	e := newEnv(t, envOptions{model: anthropicAt(t, srv, "sk-ant-idle-test-key"), tweak: func(c *Config) {
		c.ModelIdleTimeout = 300 * time.Millisecond
		c.ModelRetry = ModelRetryPolicy{Attempts: 1}
	}})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	start := time.Now()
	e.post(th, "hello")
	d := nextError(t, events)
	if !strings.Contains(d.Message, "nothing arrived for 300ms") || !d.Final {
		t.Fatalf("error event %+v: want the idle timeout named, and final (Attempts is 1)", d)
	}
	ctx, stop := context.WithTimeout(context.Background(), waitFor)
	defer stop()
	if err := e.rt.Idle(ctx, th); !errors.Is(err, ErrSliceFailed) {
		t.Fatalf("Idle = %v; want ErrSliceFailed once the hung completion was cut", err)
	}
	t.Logf("hung completion cut after %v", time.Since(start).Round(time.Millisecond))
	var queued []store.InboxItem
	e.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		queued, err = tx.Queued(th)
		return err
	})
	if len(queued) != 1 || len(e.history(th)) != 0 {
		t.Fatalf("queued %d rows, history %s: want the message kept in the inbox (RAP RT-4)", len(queued), dump(e.history(th)))
	}
}

// endless streams text until its context ends.
type endless struct{}

func (endless) Name() string         { return "endless test model" }
func (endless) SupportsImages() bool { return false }
func (endless) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
			s.TextDelta("more ")
		}
	}
}

// A completion that keeps streaming but never ends is cut
// by the overall limit.
func TestModelTimeoutBoundsCompletion(t *testing.T) {
	e := newEnv(t, envOptions{model: endless{}, tweak: func(c *Config) {
		c.ModelIdleTimeout = 5 * time.Second
		c.ModelTimeout = 300 * time.Millisecond
		c.ModelRetry = ModelRetryPolicy{Attempts: 1}
	}})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	e.post(th, "hello")
	if d := nextError(t, events); !strings.Contains(d.Message, ErrModelTimeout.Error()) || !strings.Contains(d.Message, "300ms") {
		t.Fatalf("error event %+v: want the model timeout named", d)
	}
}

// A failed completion is retried on its own, with
// backoff, through a durable timer: a model that fails twice answers on
// the third attempt without any new user message, once; the message is
// in the history once (RAP RT-4).
func TestModelFailureRetriedOnItsOwn(t *testing.T) {
	f := &flaky{Provider: scripted.New([]scripted.Turn{{Text: "hello back", Repeat: true}})}
	f.fails.Store(2)
	e := newEnv(t, envOptions{model: f, tweak: func(c *Config) {
		c.ModelRetry = ModelRetryPolicy{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	}})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	e.post(th, "hi")
	for n := 1; n <= 2; n++ {
		d := nextError(t, events)
		if d.Attempt != n || d.MaxAttempts != 5 || d.RetryInMS <= 0 || d.Final || !strings.Contains(d.Message, "model unavailable") {
			t.Fatalf("error event %d = %+v; want attempt %d of 5 with a retry scheduled", n, d, n)
		}
	}
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "hello back") })
	e.idle(th)
	h := e.history(th)
	if len(h) != 2 || h[0].Text != "hi" || h[1].Text != "hello back" {
		t.Fatalf("history = %s; want the message once, then the answer once", dump(h))
	}
	if n := len(e.model.requests()); n != 3 {
		t.Fatalf("%d completions; want 3 (two failures, one answer)", n)
	}
	// A later failure of the same thread is retried too.
	f.fails.Store(2)
	e.post(th, "again")
	e.waitHistory(th, "the second answer", func(h []store.Message) bool { return countAssistant(h, "hello back") == 2 })
	e.idle(th)
	if h = e.history(th); len(h) != 4 || h[2].Text != "again" {
		t.Fatalf("history = %s; want the second message once, then its answer once", dump(h))
	}
	// Nothing is left to fire.
	var pending bool
	e.st.View(context.Background(), func(tx store.Tx) error {
		_, ok, err := tx.NextTimer()
		pending = ok
		return err
	})
	if pending {
		t.Fatal("a retry timer is left after the answer")
	}
}

// After the last attempt the thread reports a final error
// and waits; the next message retries with the first one still kept.
func TestModelRetryGivesUpAfterLastAttempt(t *testing.T) {
	f := &flaky{Provider: scripted.New([]scripted.Turn{{Text: "hello back", Repeat: true}})}
	f.fails.Store(3)
	e := newEnv(t, envOptions{model: f, tweak: func(c *Config) {
		c.ModelRetry = ModelRetryPolicy{Initial: 10 * time.Millisecond, Attempts: 3}
	}})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	e.post(th, "first")
	var d errorData
	for !d.Final {
		d = nextError(t, events)
	}
	if d.Attempt != 3 || d.MaxAttempts != 3 || !strings.Contains(d.Message, "send a message to retry") {
		t.Fatalf("final error event = %+v", d)
	}
	if n := len(e.model.requests()); n != 3 {
		t.Fatalf("%d completions before giving up; want 3", n)
	}
	e.post(th, "second")
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "hello back") })
	if h := e.history(th); len(h) != 3 || h[0].Text != "first" || h[1].Text != "second" {
		t.Fatalf("history = %s; want both messages once, then the answer", dump(h))
	}
}

// A provider error body that echoes the API key and a
// token the runtime knows (a real HTTP server speaking the Anthropic wire
// format) reaches neither clients nor logs: both are masked.
func TestModelErrorSecretsMasked(t *testing.T) {
	const key = "sk-ant-echoed-key-0123456789"
	const token = "tool-token-ABCDEFGHIJ"
	var hits atomic.Int32
	srv := wiretest.NewAnthropic(func(wiretest.Request) wiretest.Reply {
		hits.Add(1)
		return wiretest.Reply{Status: http.StatusBadRequest, Error: "bad request from key " + key + " with token " + token}
	})
	defer srv.Close()
	e := newEnv(t, envOptions{model: anthropicAt(t, srv, key), tweak: func(c *Config) {
		c.Secrets = []string{token}
		c.ModelRetry = ModelRetryPolicy{Attempts: 1}
	}})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	e.post(th, "hello")
	d := nextError(t, events)
	if !strings.Contains(d.Message, "bad request from key [redacted] with token [redacted]") {
		t.Fatalf("error event message %q: want the provider's message with both secrets masked", d.Message)
	}
	e.rt.Idle(context.Background(), th)
	if logs := e.logs.String(); strings.Contains(logs, key) || strings.Contains(logs, token) || !strings.Contains(logs, "[redacted]") {
		t.Fatalf("a secret reached the log, or the failure was not logged:\n%s", logs)
	}
}

// failingFn is a function model whose completions fail while fail says so.
type failingFn struct {
	fnModel
	fail func(n int64) bool
	n    atomic.Int64
}

func (f *failingFn) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if f.fail(f.n.Add(1)) {
		return nil, errors.New("model unavailable (HTTP 503)")
	}
	return f.fnModel.Complete(ctx, req, s)
}

// A completion that fails after the slice already saved
// its inputs (the model ran again after a refused call, RAP BT-7) is
// retried on its own too: the retry asks the model to go on without any
// new input.
func TestModelFailureAfterSavedTurnRetried(t *testing.T) {
	f := &failingFn{fail: func(n int64) bool { return n == 2 }}
	f.fn = func(req model.Request) *model.Response {
		if in := inputOfReq(req); in.resultName == "no_such_tool" {
			return &model.Response{Text: "recovered"}
		}
		return &model.Response{ToolCalls: []model.ToolCall{toolCall("no_such_tool", map[string]any{})}}
	}
	e := newEnv(t, envOptions{model: f, tweak: func(c *Config) {
		c.ModelRetry = ModelRetryPolicy{Initial: 20 * time.Millisecond}
	}})
	th := e.newThread()
	e.post(th, "hi")
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "recovered") })
	e.idle(th)
	if h := e.history(th); len(h) != 4 || h[0].Text != "hi" || countResults(h, "there is no tool") != 1 {
		t.Fatalf("history = %s; want the message, the refused call and its error result, then the answer, once each", dump(h))
	}
	if n := f.n.Load(); n != 3 {
		t.Fatalf("%d completions; want 3 (the call, the failure, the retried answer)", n)
	}
}

// retryTimers: until Start has loaded the stored timers every thread may
// have a model retry timer (a turn's save then deletes it); after, only the
// threads with a stored or newly armed one, until a save deletes it (the
// delete is a statement in every cycle otherwise).
func TestRetryTimersKnowsWhereATimerMayBe(t *testing.T) {
	var s retryTimers
	if !s.mayHave("a") {
		t.Fatal("before load: a thread may have a timer left by an earlier run")
	}
	s.arm("b")
	s.load([]store.Timer{{ID: modelRetryTimerID("a"), ThreadID: "a", Kind: timerModelRetry}, {ID: "sleep", ThreadID: "c", Kind: timerSleep}})
	for id, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false} {
		if got := s.mayHave(id); got != want {
			t.Errorf("after load: mayHave(%s) = %v; want %v", id, got, want)
		}
	}
	s.disarmed("a")
	s.arm("d")
	if s.mayHave("a") || !s.mayHave("d") {
		t.Errorf("mayHave(a) = %v after its timer was deleted, mayHave(d) = %v after arming", s.mayHave("a"), s.mayHave("d"))
	}
}

// A failed completion's retry timer is deleted when a later message's turn is saved before it fires, also
// now that the save deletes it only where retryTimers says there may be one.
func TestModelRetryTimerDeletedByLaterAnswer(t *testing.T) {
	f := &flaky{Provider: scripted.New([]scripted.Turn{{Text: "hello back", Repeat: true}})}
	f.fails.Store(1)
	e := newEnv(t, envOptions{model: f, tweak: func(c *Config) {
		c.ModelRetry = ModelRetryPolicy{Initial: time.Hour, Max: time.Hour}
	}})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	e.post(th, "hi")
	if d := nextError(t, events); d.Attempt != 1 || d.RetryInMS <= 0 {
		t.Fatalf("error event = %+v; want attempt 1 with a retry scheduled", d)
	}
	e.post(th, "again")
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "hello back") })
	e.idle(th)
	var pending bool
	e.st.View(context.Background(), func(tx store.Tx) error {
		_, ok, err := tx.NextTimer()
		pending = ok
		return err
	})
	if pending {
		t.Fatal("the retry timer is left after the answer")
	}
}

// The cause of a completion cut by the model timeout is ErrModelTimeout
// and names the limit.
func TestModelTimeoutCauseText(t *testing.T) {
	var err error = modelTimeoutCause(90 * time.Second)
	if !errors.Is(err, ErrModelTimeout) {
		t.Fatalf("%v is not ErrModelTimeout", err)
	}
	want := fmt.Errorf("%w: no complete answer within %v (the runtime's model timeout)", ErrModelTimeout, 90*time.Second).Error()
	if err.Error() != want {
		t.Fatalf("cause %q, want %q", err.Error(), want)
	}
}
