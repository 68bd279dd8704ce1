package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// demoScript is the scripted model's part of the demo conversation.
//
//go:embed demo/demo.json
var demoScript []byte

// Placeholders in the arguments of scripted tool calls, filled in by
// demoModel from the conversation:
//   - {{subscription_id}}: the id of the latest subscribe_clock call, so the
//     script can cancel the subscription it made;
//   - {{thread_id}}: the id of the thread the model runs in, read from the
//     runtime's note that starts a thread spawned for a subscription event
//     (RAP SU-6), so the script can close it;
//   - {{event}}: the text of the latest subscription event, so the script
//     can report it to the parent thread.
const (
	subscriptionIDPlaceholder = "{{subscription_id}}"
	threadIDPlaceholder       = "{{thread_id}}"
	eventPlaceholder          = "{{event}}"
)

// spawnedThreadID finds the thread id in the runtime's note to a thread
// spawned for an event: "This thread (ID) was started …" or "thread_id "ID"".
var spawnedThreadID = regexp.MustCompile(`This thread \(([A-Za-z0-9_-]+)\)|thread_id "([A-Za-z0-9_-]+)"`)

// The demo's user messages. The scripted model reacts to "Tokyo" and
// "clock".
const (
	demoAskTime  = "What time is it in Tokyo?"
	demoAskClock = "Start the clock: wake me on each tick, and stop it after the second tick."
	demoAskNap   = "Take a nap of one second, then tell me when you wake up."
)

// demoNap is how long the demo's sleep step sleeps (the script's
// sleep {"seconds": 1}).
const demoNap = time.Second

func init() {
	register(&command{
		name:    "demo",
		summary: "run a tool server, the runtime and a model in one process and play a short conversation",
		usage:   "rap demo [--model PROVIDER:MODEL] [--data-dir DIR] [--verbose]",
		run:     runDemo,
	})
}

type demoOptions struct {
	model   string
	dataDir string
	verbose bool
	timeout time.Duration // per step
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commands["demo"]
	fs := newFlagSet(c, stderr)
	var opts demoOptions
	fs.StringVar(&opts.model, "model", "", "model as `PROVIDER:MODEL`; default: anthropic when ANTHROPIC_API_KEY is set, openai when OPENAI_BASE_URL is set, else the built-in scripted model")
	fs.StringVar(&opts.dataDir, "data-dir", "", "keep the runtime's store in `DIR`; default: a temporary directory removed at the end")
	fs.BoolVar(&opts.verbose, "verbose", false, "show the runtime's and the tool server's logs")
	fs.DurationVar(&opts.timeout, "step-timeout", 30*time.Second, "give up on a step after this long")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	return demo(ctx, opts, stdout, stderr)
}

// demoModel wraps the scripted model: it fills in the subscription id
// placeholder of scripted tool calls.
type demoModel struct{ model.Provider }

func (m demoModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	resp, err := m.Provider.Complete(ctx, req, s)
	if err != nil || resp == nil {
		return resp, err
	}
	values := map[string]string{}
	injected := map[string]bool{}
	for _, msg := range req.Messages {
		for _, c := range msg.ToolCalls {
			switch c.Name {
			case "subscribe_clock":
				values[subscriptionIDPlaceholder] = c.ID
			case runtime.InjectedToolName:
				injected[c.ID] = true
			}
		}
		for _, r := range msg.ToolResults {
			if injected[r.CallID] {
				values[eventPlaceholder] = r.Text
			}
		}
		if msg.Role == model.RoleUser {
			if sm := spawnedThreadID.FindStringSubmatch(msg.Text); sm != nil {
				values[threadIDPlaceholder] = sm[1] + sm[2]
			}
		}
	}
	for i, c := range resp.ToolCalls {
		for ph, v := range values {
			if bytes.Contains(c.Arguments, []byte(ph)) {
				// The placeholder sits inside a JSON string: insert v escaped.
				q, _ := json.Marshal(v)
				c.Arguments = bytes.ReplaceAll(c.Arguments, []byte(ph), q[1:len(q)-1])
			}
		}
		resp.ToolCalls[i].Arguments = c.Arguments
	}
	return resp, nil
}

// demoModelFor picks the demo's model: the --model flag, else a real model
// configured through the environment, else the embedded script.
func demoModelFor(spec, dataDir string) (model.Provider, bool, error) {
	if spec == "" {
		switch {
		case os.Getenv(anthropic.EnvAPIKey) != "":
			spec = "anthropic"
		case os.Getenv("OPENAI_BASE_URL") != "":
			spec = "openai"
		}
	}
	if spec == "" {
		path := filepath.Join(dataDir, "demo.json")
		if err := os.WriteFile(path, demoScript, 0o600); err != nil {
			return nil, false, fmt.Errorf("write the demo script: %w", err)
		}
		m, err := scripted.Load(path)
		if err != nil {
			return nil, false, err
		}
		return demoModel{m}, true, nil
	}
	ms, err := parseModelSpec(spec, getenvOS)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", errUsage, err)
	}
	m, err := newModel(ms, nil)
	if err != nil {
		return nil, false, err
	}
	if ms.Provider == "scripted" {
		return demoModel{m}, true, nil
	}
	return m, false, nil
}

// listenLoopback serves h on a fresh loopback port and returns its URL and
// a function that shuts it down.
func listenLoopback(h http.Handler, log *slog.Logger) (string, func(context.Context), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen on a loopback port: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go srv.Serve(ln)
	stop := func(ctx context.Context) {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// demo runs the demo and prints its transcript to stdout.
func demo(ctx context.Context, opts demoOptions, stdout, stderr io.Writer) (err error) {
	if opts.timeout <= 0 {
		opts.timeout = 30 * time.Second
	}
	level := slog.LevelWarn
	if opts.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	dataDir := opts.dataDir
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "rap-demo-"); err != nil {
			return fmt.Errorf("create a temporary data dir: %w (pass --data-dir DIR)", err)
		}
		defer os.RemoveAll(dataDir)
	} else if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", dataDir, err)
	}
	mdl, isScripted, err := demoModelFor(opts.model, dataDir)
	if err != nil {
		return err
	}

	// The tool server.
	tools := gettime.New(&rap.ServerOptions{Logger: log})
	if err := tools.Start(ctx); err != nil {
		return fmt.Errorf("start the gettime tool server: %w", err)
	}
	toolURL, stopTools, err := listenLoopback(tools, log)
	if err != nil {
		return err
	}

	// The runtime.
	st, err := sqlite.Open(filepath.Join(dataDir, storeFile))
	if err != nil {
		return fmt.Errorf("open the demo store: %w", err)
	}
	secret, err := runtime.LoadOrCreateSecret(dataDir)
	if err != nil {
		st.Close()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return fmt.Errorf("listen on a loopback port: %w", err)
	}
	rtURL := "http://" + ln.Addr().String()
	rt, err := runtime.New(runtime.Config{
		Store: st, Model: mdl, ToolServers: []string{toolURL}, PublicURL: rtURL,
		Secret: secret, Logger: log, DisplayText: displayText,
		System: "You are the gorap demo agent. Use the tools to answer; be brief.",
	})
	if err != nil {
		ln.Close()
		st.Close()
		return err
	}
	if err := rt.Start(ctx); err != nil {
		ln.Close()
		st.Close()
		return err
	}
	rtSrv := runtime.NewHTTPServer(rt.Handler(), runtime.ServerLimits{}, log)
	go rtSrv.Serve(runtime.LimitListener(ln, runtime.ServerLimits{}))
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if e := rt.Shutdown(sctx); e != nil {
			log.Warn("runtime shutdown", "err", e)
		}
		if e := rtSrv.Shutdown(sctx); e != nil {
			rtSrv.Close()
		}
		if e := tools.Shutdown(sctx); e != nil {
			log.Warn("tool server shutdown", "err", e)
		}
		stopTools(sctx)
		st.Close()
	}()

	var toolNames []string
	if ts, _, err := rap.FetchToolset(ctx, nil, toolURL); err == nil {
		for _, t := range ts.Tools {
			toolNames = append(toolNames, t.Name)
		}
	}
	fmt.Fprintln(stdout, "gorap demo: a RAP tool server, the agent runtime and a model in one process")
	fmt.Fprintf(stdout, "  model:       %s\n", describeModel(mdl))
	fmt.Fprintf(stdout, "  tool server: gettime at %s (%s)\n", toolURL, strings.Join(toolNames, ", "))
	fmt.Fprintf(stdout, "  runtime:     %s (store %s)\n\n", rtURL, filepath.Join(dataDir, storeFile))

	// The conversation, through the runtime's HTTP client API.
	d, err := startDemoSession(ctx, rtURL, stdout, stderr)
	if err != nil {
		return err
	}
	defer d.close()
	p := &demoPlayer{demoSession: d, strict: isScripted, timeout: opts.timeout}
	report, err := p.play(ctx)
	d.flush()
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "What the demo showed:")
	for _, line := range report {
		fmt.Fprintln(stdout, "  "+line)
	}
	if err != nil {
		return fmt.Errorf("demo failed: %w", err)
	}
	return nil
}

// demoSession is the demo's client of the runtime: a thread and its event
// stream printed as a transcript, with the child threads it starts
// followed and printed under it.
type demoSession struct {
	api      *apiClient
	threadID string
	toolsets struct {
		Loaded []string `json:"loaded"`
		Errors []string `json:"errors"`
	}
	watch  *threadWatch
	mu     sync.Mutex // guards the output
	tr     *transcript
	f      *follower
	cancel context.CancelFunc
	done   chan struct{}
	out    io.Writer
}

func startDemoSession(ctx context.Context, base string, out, errOut io.Writer) (*demoSession, error) {
	api, err := newAPIClient(base, "")
	if err != nil {
		return nil, err
	}
	d := &demoSession{api: api, tr: newTranscript(out), done: make(chan struct{}), out: out}
	d.tr.echoUser = true
	var created struct {
		ID       string          `json:"id"`
		Toolsets json.RawMessage `json:"toolsets"`
	}
	if err := api.do(ctx, http.MethodPost, "/v1/threads", struct{}{}, &created); err != nil {
		return nil, err
	}
	d.threadID = created.ID
	if len(created.Toolsets) > 0 {
		_ = json.Unmarshal(created.Toolsets, &d.toolsets)
	}
	fmt.Fprintf(out, "thread %s\n", d.threadID)
	sctx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	d.f = newFollower(sctx, api, &d.mu, errOut)
	root := d.f.root(d.threadID, d.tr)
	d.watch = root.watch
	events, _, err := api.events(sctx, d.threadID)
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
			d.f.handle(root, ev)
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
	if err := p.api.postMessage(ctx, p.threadID, text); err != nil {
		return err
	}
	goal := settleGoal{text: text, countBefore: before, needIdle: true, idlesBefore: ws.idles, errsBefore: ws.errs, allCalls: true}
	return waitSettled(ctx, p.api, p.watch, p.threadID, goal, p.timeout)
}

// play runs the steps and returns the report lines.
func (p *demoPlayer) play(ctx context.Context) ([]string, error) {
	var report []string
	var failures []string
	check := func(ok bool, good, bad string) {
		if ok {
			report = append(report, "✓ "+good)
			return
		}
		report = append(report, "✗ "+bad)
		failures = append(failures, bad)
	}

	// 1. Discovery happened when the thread was created.
	check(len(p.toolsets.Loaded) > 0 && len(p.toolsets.Errors) == 0,
		fmt.Sprintf("discovery: the runtime fetched /.well-known/rap-toolset and loaded %s for this session", strings.Join(p.toolsets.Loaded, ", ")),
		fmt.Sprintf("discovery: loaded %v, errors %v", p.toolsets.Loaded, p.toolsets.Errors))

	// 2. An asynchronous tool call.
	p.say("\n── an asynchronous tool call ──\n")
	if err := p.post(ctx, demoAskTime); err != nil {
		return append(report, "✗ asynchronous tool call: "+err.Error()), err
	}
	msgs, err := p.api.history(ctx, p.threadID)
	if err != nil {
		return report, err
	}
	call, res, delay := findCall(msgs, "get_time_in_zone")
	switch {
	case call != nil && res != nil && !res.IsError:
		report = append(report, fmt.Sprintf("✓ asynchronous tool call: get_time_in_zone was acknowledged at once and its result came back through the callback URL %v later", delay.Round(time.Millisecond)))
	case p.strict:
		check(false, "", "asynchronous tool call: no successful get_time_in_zone result in the history")
	default:
		report = append(report, "– asynchronous tool call: the model did not call get_time_in_zone")
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
			report = append(report, "– subscription: the model did not subscribe to the clock")
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
		how := fmt.Sprintf("each injected as a %s call", runtime.InjectedToolName)
		if kids, err := p.children(ctx); err == nil && len(kids) > 0 {
			how = fmt.Sprintf("each handled by a child thread that reported back as a %s call; %d child thread(s)", runtime.InjectedToolName, len(kids))
		}
		check(events > 0 || !p.strict,
			fmt.Sprintf("subscription: subscribe_clock was confirmed and %d clock event(s) woke the agent (%s)", events, how),
			"subscription: no clock event reached the thread")
		cancelCall, cancelRes, _ := findCall(msgs, "cancel_subscription")
		switch {
		case cancelCall != nil && cancelRes != nil && !cancelRes.IsError:
			report = append(report, "✓ cancellation: cancel_subscription stopped the clock")
		case cancelCall != nil && cancelRes != nil && strings.Contains(cancelRes.Text, "no tool named"):
			report = append(report, "– cancellation: this runtime does not offer the built-in cancel_subscription yet (it comes with the built-in tools); the model got an error result and the subscription ended with its final event")
		case cancelCall != nil && cancelRes != nil:
			report = append(report, "– cancellation: cancel_subscription answered with an error: "+oneLine(cancelRes.Text, 200))
		default:
			report = append(report, "– cancellation: the model did not cancel the subscription")
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
	sleepCall, sleepRes, slept := findCall(msgs, runtime.BuiltinSleep)
	wakes := 0
	if sleepCall != nil {
		wakes = countResults(msgs, sleepCall.ID)
	}
	switch {
	case sleepCall != nil && sleepRes != nil && !sleepRes.IsError && slept >= demoNap*9/10 && wakes == 1:
		report = append(report, fmt.Sprintf("✓ sleep: the agent called the built-in sleep, the thread hibernated and its timer woke it once, %v later: %q", slept.Round(10*time.Millisecond), sleepRes.Text))
	case p.strict && sleepCall != nil && sleepRes != nil:
		check(false, "", fmt.Sprintf("sleep: %d result(s); the first, %q, came %v after the call; want one wake-up after about %v", wakes, oneLine(sleepRes.Text, 200), slept, demoNap))
	case p.strict:
		check(false, "", "sleep: no sleep call with a result in the history")
	default:
		report = append(report, "– sleep: the model did not call the built-in sleep")
	}

	if len(failures) > 0 {
		return report, errors.New(strings.Join(failures, "; "))
	}
	return report, nil
}

// waitSubscriptionEnded waits until the subscription of call id is no
// longer active and the thread is settled; it returns the final state.
func (p *demoPlayer) waitSubscriptionEnded(ctx context.Context, callID string) (string, error) {
	deadline := time.Now().Add(p.timeout)
	for {
		var info struct {
			Queued        int                  `json:"queued"`
			PendingCalls  []store.Call         `json:"pending_calls"`
			Subscriptions []store.Subscription `json:"subscriptions"`
		}
		if err := p.api.do(ctx, http.MethodGet, "/v1/threads/"+p.threadID, nil, &info); err != nil {
			return "", err
		}
		state := ""
		for _, s := range info.Subscriptions {
			if s.CallID == callID {
				state = string(s.State)
			}
		}
		ws := p.watch.snapshot()
		if state != "" && state != string(store.SubscriptionActive) && info.Queued == 0 && len(info.PendingCalls) == 0 && !ws.running {
			busy, err := p.childrenBusy(ctx)
			if err != nil {
				return "", err
			}
			if busy == 0 {
				return state, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the subscription was still %q after %v (queued %d, pending calls %d)", orNone(state), p.timeout, info.Queued, len(info.PendingCalls))
		}
		select {
		case <-ws.changed:
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// children returns the threads spawned from the demo's thread.
func (p *demoPlayer) children(ctx context.Context) ([]store.Thread, error) {
	return p.api.children(ctx, p.threadID)
}

// childrenBusy counts the child threads that are still open and have
// queued input or pending calls.
func (p *demoPlayer) childrenBusy(ctx context.Context) (int, error) {
	kids, err := p.children(ctx)
	if err != nil {
		return 0, err
	}
	busy := 0
	for _, k := range kids {
		if k.Status == store.ThreadClosed {
			continue
		}
		st, err := p.api.status(ctx, k.ID)
		if err != nil {
			return 0, err
		}
		if st.Queued > 0 || len(st.PendingCalls) > 0 {
			busy++
		}
	}
	return busy, nil
}

func mustHistory(ctx context.Context, api *apiClient, threadID string) []store.Message {
	msgs, _ := api.history(ctx, threadID)
	return msgs
}

// findCall returns the last call of tool name in msgs, its result, and how
// long after the call the result was recorded.
func findCall(msgs []store.Message, name string) (*store.ToolCall, *store.ToolResult, time.Duration) {
	var call *store.ToolCall
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
func countInjected(msgs []store.Message) int {
	n := 0
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.Name == runtime.InjectedToolName {
				n++
			}
		}
	}
	return n
}

// countResults counts the results of call id in msgs.
func countResults(msgs []store.Message, id string) int {
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
