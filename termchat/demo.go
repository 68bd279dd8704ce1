package termchat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// The demo's user messages. The built-in script reacts to "Tokyo" and
// "clock".
const (
	demoAskTime  = "What time is it in Tokyo?"
	demoAskClock = "Start the clock: wake me on each tick, and stop it after the second tick."
	demoAskNap   = "Take a nap of one second, then tell me when you wake up."
)

// demoNap is how long the demo's sleep step sleeps (the script's
// sleep {"seconds": 1}).
const demoNap = time.Second

// DemoOptions configure PlayDemo.
type DemoOptions struct {
	// API is the client API of the demo's runtime.
	API API
	// Strict is set for the built-in script: every step must happen.
	// With a real model the demo reports what the model chose to do.
	Strict bool
	// StepTimeout bounds each step; default 30 seconds.
	StepTimeout time.Duration
	// Stdout receives the transcript and the report, Stderr the client's
	// own messages.
	Stdout, Stderr io.Writer
}

// PlayDemo plays the demo conversation against a runtime: an asynchronous
// tool call, a subscription whose events wake the agent through child
// threads, its cancellation, and a durable sleep. It prints the
// transcript, then what each step showed. It returns an *ExitError (status
// 1) when a step it reports did not happen.
func PlayDemo(ctx context.Context, opts DemoOptions) error {
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = 30 * time.Second
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	d, err := startDemoSession(ctx, opts.API, opts.Stdout, opts.Stderr)
	if err != nil {
		return refusal(err)
	}
	defer d.close()
	p := &demoPlayer{demoSession: d, strict: opts.Strict, timeout: opts.StepTimeout}
	report, err := p.play(ctx)
	d.flush()
	fmt.Fprintln(opts.Stdout)
	fmt.Fprintln(opts.Stdout, "What the demo showed:")
	for _, line := range report {
		fmt.Fprintln(opts.Stdout, "  "+line)
	}
	if err != nil {
		return failure("demo failed: %w", err)
	}
	return nil
}

// demoSession is the demo's client of the runtime: a thread and its event
// stream printed as a transcript, with the child threads it starts
// followed and printed under it.
type demoSession struct {
	api      API
	threadID string
	created  *Created
	watch    *threadWatch
	root     *followedThread
	mu       sync.Mutex // guards the output
	tr       *transcript
	f        *follower
	cancel   context.CancelFunc
	done     chan struct{}
	out      io.Writer
}

func startDemoSession(ctx context.Context, api API, out, errOut io.Writer) (*demoSession, error) {
	d := &demoSession{api: api, tr: newTranscript(out, Display{}), done: make(chan struct{}), out: out}
	d.tr.echoUser = true
	created, err := api.CreateThread(ctx)
	if err != nil {
		return nil, err
	}
	d.created, d.threadID = created, created.ID
	fmt.Fprintf(out, "thread %s\n", shortID(d.threadID))
	sctx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	d.f = newFollower(sctx, api, &d.mu, errOut)
	d.root = d.f.root(d.threadID, d.tr)
	d.watch = d.root.watch
	events, _, err := api.Events(sctx, d.threadID)
	if err != nil {
		cancel()
		return nil, err
	}
	first := make(chan struct{})
	go func() {
		defer close(d.done)
		var once sync.Once
		defer once.Do(func() { close(first) })
		for ev := range events {
			d.f.handle(d.root, ev)
			once.Do(func() { close(first) })
		}
	}()
	// The stream starts with the session's toolsets: print them before the
	// conversation.
	select {
	case <-first:
	case <-time.After(5 * time.Second):
	}
	return d, nil
}

// flush ends a half-printed line.
func (d *demoSession) flush() {
	d.mu.Lock()
	d.tr.endLine()
	d.mu.Unlock()
}

func (d *demoSession) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tr.endLine()
	fmt.Fprintf(d.out, format, args...)
}

func (d *demoSession) close() {
	d.cancel()
	<-d.done
	d.f.wg.Wait()
}

// demoPlayer plays the conversation. In strict mode (the scripted model)
// every step must show what it is meant to show; with a real model the
// demo reports what happened.
type demoPlayer struct {
	*demoSession
	strict  bool
	timeout time.Duration
}

// post sends a user message and waits until the thread has processed it
// and no tool call is pending.
func (p *demoPlayer) post(ctx context.Context, text string) error {
	ws := p.watch.snapshot()
	before, err := countUserText(ctx, p.api, p.threadID, text)
	if err != nil {
		return err
	}
	if err := p.api.PostMessage(ctx, p.threadID, text); err != nil {
		return err
	}
	goal := settleGoal{text: text, countBefore: before, needIdle: true, idlesBefore: ws.idles, errsBefore: ws.errs, allCalls: true}
	return waitSettled(ctx, p.api, p.watch, p.threadID, goal, p.timeout)
}

// play runs the steps and returns the report lines.
func (p *demoPlayer) play(ctx context.Context) ([]string, error) {
	var report []string
	var failures []string
	// skip records a step that did not happen: with the built-in script it
	// was meant to, and the demo fails.
	var skip func(string)
	check := func(ok bool, good, bad string) {
		if ok {
			report = append(report, "✓ "+good)
			return
		}
		report = append(report, "✗ "+bad)
		failures = append(failures, bad)
	}

	skip = func(msg string) {
		if p.strict {
			check(false, "", msg)
			return
		}
		report = append(report, "– "+msg)
	}

	// 1. Discovery happened when the thread was created.
	check(len(p.created.Toolsets.Loaded) > 0 && len(p.created.Toolsets.Errors) == 0,
		fmt.Sprintf("discovery: the runtime fetched /.well-known/rap-toolset and loaded %s for this session", strings.Join(p.created.Toolsets.Loaded, ", ")),
		fmt.Sprintf("discovery: loaded %v, errors %v", p.created.Toolsets.Loaded, p.created.Toolsets.Errors))

	// 2. An asynchronous tool call.
	p.say("\n── an asynchronous tool call ──\n")
	if err := p.post(ctx, demoAskTime); err != nil {
		return append(report, "✗ asynchronous tool call: "+err.Error()), err
	}
	msgs, err := p.api.History(ctx, p.threadID)
	if err != nil {
		return report, err
	}
	call, res, delay := findCall(msgs, "get_time_in_zone")
	switch {
	case call != nil && res != nil && !res.IsError && !p.shown(res.CallID):
		check(false, "", "asynchronous tool call: get_time_in_zone's result is in the history but the transcript did not show it")
	case call != nil && res != nil && !res.IsError:
		report = append(report, fmt.Sprintf("✓ asynchronous tool call: get_time_in_zone was acknowledged at once and its result came back through the callback URL %v later", delay.Round(time.Millisecond)))
	case p.strict:
		check(false, "", "asynchronous tool call: no successful get_time_in_zone result in the history")
	default:
		skip("asynchronous tool call: the model did not call get_time_in_zone")
	}

	// 3. A subscription whose events wake the agent, and its cancellation.
	p.say("\n── a subscription wakes the agent ──\n")
	if err := p.post(ctx, demoAskClock); err != nil {
		return append(report, "✗ subscription: "+err.Error()), err
	}
	subCall, subRes, _ := findCall(mustHistory(ctx, p.api, p.threadID), "subscribe_clock")
	if subCall == nil || subRes == nil || subRes.IsError {
		if p.strict {
			check(false, "", "subscription: no confirmed subscribe_clock call in the history")
		} else {
			skip("subscription: the model did not subscribe to the clock")
		}
	} else {
		// Wait until the subscription ended (final event or cancellation)
		// and the thread has handled everything.
		ended, err := p.waitSubscriptionEnded(ctx, subCall.ID)
		if err != nil && p.strict {
			return append(report, "✗ subscription: "+err.Error()), err
		}
		msgs = mustHistory(ctx, p.api, p.threadID)
		events := countInjected(msgs)
		how := "each delivered to the agent's thread"
		if kids, err := p.children(ctx); err == nil && len(kids) > 0 {
			how = "each handled by a child thread that reported back to the agent; " + plural(len(kids), "child thread")
		}
		check(events > 0 || !p.strict,
			fmt.Sprintf("subscription: subscribe_clock was confirmed and %s woke the agent (%s)", plural(events, "clock event"), how),
			"subscription: no clock event reached the thread")
		cancelCall, cancelRes, _ := findCall(msgs, "cancel_subscription")
		switch {
		case cancelCall != nil && cancelRes != nil && !cancelRes.IsError:
			report = append(report, "✓ cancellation: cancel_subscription stopped the clock")
		case cancelCall != nil && cancelRes != nil && strings.Contains(cancelRes.Text, "no tool named"):
			skip("cancellation: this runtime does not offer the built-in cancel_subscription yet (it comes with the built-in tools); the model got an error result and the subscription ended with its final event")
		case cancelCall != nil && cancelRes != nil:
			skip("cancellation: cancel_subscription answered with an error: " + oneLine(cancelRes.Text, 200))
		default:
			skip("cancellation: the model did not cancel the subscription")
		}
		if ended == "" && p.strict {
			check(false, "", "subscription: it did not end")
		}
	}
	// 4. A sleep: the built-in sleep is a durable timer; the thread wakes
	// once when it is due (RAP BT-1).
	p.say("\n── a sleep ──\n")
	if err := p.post(ctx, demoAskNap); err != nil {
		return append(report, "✗ sleep: "+err.Error()), err
	}
	msgs = mustHistory(ctx, p.api, p.threadID)
	sleepCall, sleepRes, slept := findCall(msgs, toolSleep)
	wakes := 0
	if sleepCall != nil {
		wakes = countResults(msgs, sleepCall.ID)
	}
	switch {
	case sleepCall != nil && sleepRes != nil && !sleepRes.IsError && slept >= demoNap*9/10 && wakes == 1 && !p.shown(sleepRes.CallID):
		check(false, "", "sleep: the result is in the history but the transcript did not show it")
	case sleepCall != nil && sleepRes != nil && !sleepRes.IsError && slept >= demoNap*9/10 && wakes == 1:
		report = append(report, fmt.Sprintf("✓ sleep: the agent called the built-in sleep, the thread hibernated and its timer woke it once, %v later: %q", slept.Round(10*time.Millisecond), sleepRes.Text))
	case p.strict && sleepCall != nil && sleepRes != nil:
		check(false, "", fmt.Sprintf("sleep: %s; the first, %q, came %v after the call; want one wake-up after about %v", plural(wakes, "result"), oneLine(sleepRes.Text, 200), slept, demoNap))
	case p.strict:
		check(false, "", "sleep: no sleep call with a result in the history")
	default:
		skip("sleep: the model did not call the built-in sleep")
	}

	if len(failures) > 0 {
		return report, errors.New(strings.Join(failures, "; "))
	}
	return report, nil
}

// waitSubscriptionEnded waits until the thread tree is quiet — the
// subscription of call id no longer active, every event handled by its
// child thread and reported back, and all of it printed — and returns the
// subscription's final state.
func (p *demoPlayer) waitSubscriptionEnded(ctx context.Context, callID string) (string, error) {
	if err := p.f.waitQuiet(ctx, p.root, p.watch.snapshot().errs, p.timeout); err != nil {
		return "", err
	}
	st, err := p.api.Status(ctx, p.threadID)
	if err != nil {
		return "", err
	}
	for _, s := range st.Subscriptions {
		if s.CallID == callID {
			return s.State, nil
		}
	}
	return "", nil
}

// children returns the threads spawned from the demo's thread.
func (p *demoPlayer) children(ctx context.Context) ([]api.Thread, error) {
	return p.api.Threads(ctx, p.threadID)
}

// shown reports whether the transcript printed the result of call id.
func (p *demoPlayer) shown(callID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tr.results[callID]
}

func mustHistory(ctx context.Context, a API, threadID string) []api.Message {
	msgs, _ := a.History(ctx, threadID)
	return msgs
}

// findCall returns the last call of tool name in msgs, its result, and how
// long after the call the result was recorded.
func findCall(msgs []api.Message, name string) (*api.ToolCall, *api.ToolResult, time.Duration) {
	var call *api.ToolCall
	var callTime time.Time
	for i := range msgs {
		for j := range msgs[i].ToolCalls {
			if msgs[i].ToolCalls[j].Name == name {
				call = &msgs[i].ToolCalls[j]
				callTime = msgs[i].Created
			}
		}
	}
	if call == nil {
		return nil, nil, 0
	}
	for i := range msgs {
		for j := range msgs[i].ToolResults {
			if msgs[i].ToolResults[j].CallID == call.ID {
				return call, &msgs[i].ToolResults[j], msgs[i].Created.Sub(callTime)
			}
		}
	}
	return call, nil, 0
}

// countInjected counts the subscription events injected into msgs.
func countInjected(msgs []api.Message) int {
	n := 0
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.Name == toolInjected {
				n++
			}
		}
	}
	return n
}

// countResults counts the results of call id in msgs.
func countResults(msgs []api.Message, id string) int {
	n := 0
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			if r.CallID == id {
				n++
			}
		}
	}
	return n
}
