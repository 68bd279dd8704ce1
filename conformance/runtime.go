package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// RuntimeConfig says how to check a runtime.
type RuntimeConfig struct {
	// Kit is the conformance toolset the runtime was configured with; it
	// must be listening before the runtime loads its toolsets.
	Kit *RuntimeKit
	// API is the base URL of the runtime's gorap /v1 client API. The
	// checks then converse with the runtime themselves and read its
	// conversations. Empty means manual mode: the checks print what to
	// send to the agent to Instructions and wait for the runtime's calls.
	API string
	// Token is the client token of the /v1 API.
	Token string
	// Instructions receives manual mode's instructions, one a line.
	Instructions io.Writer
	// MigrateTo is the base URL of a second runtime, configured with the
	// same toolset, to move a session to; empty skips the migration check.
	MigrateTo string
	// MigrateToken is MigrateTo's client token.
	MigrateToken string
}

// runtimeRun is the state the checks of one run share: the calls earlier
// checks made, which later ones build on.
type runtimeRun struct {
	cfg   RuntimeConfig
	kit   *RuntimeKit
	d     driver
	err   error // why the driver could not be made
	nonce string
	// silent is set when the runtime made no call at all in time: the
	// later checks that need one are skipped rather than each waiting.
	silent bool

	fields *stepCall // the first echo call, of a root conversation
	sub    *stepCall // the confirmed subscription
	cancel *stepCall // the interrupted call
}

// stepCall is a step's conversation and the invocation it made.
type stepCall struct {
	conv string
	inv  *ReceivedInvocation
	rec  Received
}

// RuntimeSuite returns the checks of a runtime, in the order they run.
// The runtime must have loaded cfg.Kit's toolset, and its model must call
// the kit's tools when told to: for gorap's runtime, run it with the
// scripted model and the script of RuntimeScript.
func RuntimeSuite(cfg RuntimeConfig) *Suite {
	r := &runtimeRun{cfg: cfg, kit: cfg.Kit, nonce: newNonce()}
	if cfg.API != "" {
		c, err := client.New(cfg.API, client.WithToken(cfg.Token))
		r.d, r.err = &apiDriver{c: c}, err
	} else {
		w := cfg.Instructions
		if w == nil {
			w = io.Discard
		}
		r.d = &manualDriver{w: w}
	}
	return r.suite()
}

// runtimeSuiteWith is RuntimeSuite with a driver of the caller's, for
// tests that play the runtime themselves.
func runtimeSuiteWith(cfg RuntimeConfig, d driver) *Suite {
	r := &runtimeRun{cfg: cfg, kit: cfg.Kit, d: d, nonce: newNonce()}
	return r.suite()
}

func (r *runtimeRun) suite() *Suite {
	s := &Suite{Name: "runtime"}
	r.addInvocationChecks(s)
	r.addCallbackChecks(s)
	r.addLifecycleChecks(s)
	r.addDispatchChecks(s)
	r.addMigrateCheck(s)
	return s
}

func newNonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// StepMessage is the message that makes the agent call tool for step. Its
// "[step:NAME]" tag is what RuntimeScript's turns match.
func StepMessage(step, tool string) string {
	return fmt.Sprintf("[step:%s] Call the tool %s with step %q.", step, tool, step)
}

// ready fails the check when the run cannot drive the runtime.
func (r *runtimeRun) ready(t *T) {
	if r.kit == nil {
		t.Failf("no conformance toolset: RuntimeConfig.Kit is nil")
	}
	if r.err != nil {
		t.Failf("cannot reach the runtime's /v1 API: %v", r.err)
	}
}

// call starts a conversation that makes the agent call tool for step, and
// waits for the invocation. optional skips the check when none comes.
func (r *runtimeRun) call(t *T, step, tool string, optional bool) *stepCall {
	r.ready(t)
	if r.silent {
		t.Skipf("the runtime made no call when asked in %s", checkRuntimeInvocationFields.ID)
	}
	from := r.kit.mark()
	conv, err := r.d.start(t.Context(), step, StepMessage(step, tool))
	if err != nil {
		t.Failf("could not start a conversation: %v", err)
	}
	return r.awaitCall(t, conv, step, tool, from, optional)
}

func (r *runtimeRun) awaitCall(t *T, conv, step, tool string, from int, optional bool) *stepCall {
	rec, err := r.kit.await(t.Context(), from, invocationOf(step))
	if err != nil {
		if optional {
			t.Skipf("the runtime did not call %s for step %q in time", tool, step)
		}
		if r.kit.count(0, func(rec Received) bool { return rec.Kind == "invoke" }) == 0 {
			r.silent = true
		}
		t.Failf("the runtime did not call %s for step %q in time: check that it loaded the toolset at %s (see runtime.discovery.fetch) and that its model calls the tool when asked (for gorap: rap serve --model scripted:FILE, FILE from rap conformance runtime --print-script)",
			tool, step, r.kit.URL())
	}
	t.Record(rec.Exchange)
	if rec.Invocation == nil {
		t.Failf("the invocation's body is not a JSON object: %.200s", rec.Body)
	}
	return &stepCall{conv: conv, inv: rec.Invocation, rec: rec}
}

// send POSTs a callback message to url as a tool would, and returns the
// status and body of the answer.
func send(t *T, url string, msg map[string]any) (int, string) {
	body, err := json.Marshal(msg)
	if err != nil {
		t.Failf("encoding a callback: %v", err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Failf("the callback URL %q is not usable: %v", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.Client().Do(req)
	if err != nil {
		t.Failf("POST to the callback URL failed: %v", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(answer)
}

// result is a tool_result for the call with text.
func (c *stepCall) result(text string) map[string]any {
	m := map[string]any{"type": "tool_result", "group_id": c.inv.GroupID, "id": c.inv.ID, "text": text}
	if id, ok := c.inv.Raw["call_id"]; ok && string(id) != "null" {
		m["call_id"] = id
	}
	return m
}

// sendOK sends msg to the call's callback URL and fails the check unless
// the runtime answers 200 (RAP RE-7).
func (c *stepCall) sendOK(t *T, msg map[string]any) {
	status, answer := send(t, c.inv.CallbackURL, msg)
	if status != http.StatusOK {
		t.Failf("the callback endpoint answered %d to a %s: %.200s", status, msg["type"], answer)
	}
}

// waitHistory polls the conversation's history until ok holds of it. It
// returns errNoAPI without the API, and the last history read when ctx
// ends first.
func (r *runtimeRun) waitHistory(ctx context.Context, conv string, ok func([]api.Message) bool) ([]api.Message, bool, error) {
	ctx, cancel := nearDeadline(ctx)
	defer cancel()
	var last []api.Message
	for {
		msgs, err := r.d.history(ctx, conv)
		if err == errNoAPI {
			return nil, false, err
		}
		if err == nil {
			last = msgs
			if ok(msgs) {
				return msgs, true, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, false, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// seen waits until a tool result of the conversation contains s, and
// fails the check with what saying why it matters when none does. It
// returns false without the API.
func (r *runtimeRun) seen(t *T, conv, s, what string) bool {
	_, ok, err := r.waitHistory(t.Context(), conv, func(m []api.Message) bool { return countIn(m, s) > 0 })
	if err == errNoAPI {
		return false
	}
	if !ok {
		t.Failf("%s, but the conversation never showed it to the model", what)
	}
	return true
}

// settledCount lets the conversation settle and counts its tool results
// containing s; ok is false without the API.
func (r *runtimeRun) settledCount(t *T, conv, s string) (n int, ok bool) {
	ctx, cancel := nearDeadline(t.Context())
	defer cancel()
	if err := r.d.settle(ctx, conv); err != nil {
		t.Failf("the conversation did not settle in time: %v", err)
	}
	msgs, err := r.d.history(t.Context(), conv)
	if err == errNoAPI {
		return 0, false
	}
	if err != nil {
		t.Failf("reading the conversation: %v", err)
	}
	return countIn(msgs, s), true
}
