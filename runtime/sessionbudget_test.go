package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// namedUsageModel is usageModel under a name of the test's choosing.
type namedUsageModel struct {
	usageModel
	name string
}

func (m *namedUsageModel) Name() string { return m.name }

// echoWithUsage answers every message, reporting 1,000 input and 100
// output tokens for each completion, under name.
func echoWithUsage(name string) *namedUsageModel {
	return &namedUsageModel{usageModel{Provider: scripted.New([]scripted.Turn{{Text: "answer to {{last_user}}", Repeat: true}}),
		u: model.Usage{InputTokens: 1000, OutputTokens: 100}}, name}
}

// forEachStore runs test on SQLite and, when GORAP_TEST_POSTGRES_URL is
// set, on PostgreSQL.
func forEachStore(t *testing.T, test func(t *testing.T, pg bool)) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { test(t, pg) })
	}
}

// budgetFailures counts the slices the session budget stopped, from the
// runtime's log.
func budgetFailures(e *env) int {
	n := 0
	for _, rec := range e.logs.records("slice failed") {
		if err, _ := rec["err"].(string); strings.Contains(err, "this session has used its budget") {
			n++
		}
	}
	return n
}

// queuedInputs returns the thread's inbox rows not yet consumed.
func queuedInputs(t *testing.T, e *env, th string) []store.InboxItem {
	t.Helper()
	var q []store.InboxItem
	if err := e.rt.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		q, err = tx.Queued(th)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return q
}

// waitIdleFailed waits until the thread's worker stopped on a failed
// slice and returns the failure.
func waitIdleFailed(t *testing.T, e *env, th string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err := e.rt.Idle(ctx, th)
	if !errors.Is(err, ErrSliceFailed) {
		t.Fatalf("Idle = %v; want the slice stopped (ErrSliceFailed)", err)
	}
	return err
}

// A session whose completions used its token budget asks the model no
// more: the next message gets an error event naming the budget and the
// spend and saying what to do, the message stays queued, no retry is
// scheduled, the state's session_budget says it is over, compacting on
// demand is refused, and nothing retries it on its own: on PostgreSQL
// not even the sweep, once the thread's lease has expired.
func TestSessionBudgetStopsTheModel(t *testing.T) {
	forEachStore(t, func(t *testing.T, pg bool) {
		e := newEnv(t, envOptions{postgres: pg, model: echoWithUsage("anthropic:claude-sonnet-4-5"), tweak: func(c *Config) {
			c.SessionBudget = SessionBudget{Tokens: 2000}
			c.LeaseTTL, c.SweepEvery = time.Second, 50*time.Millisecond
		}})
		th := e.newThread()
		e.post(th, "one")
		e.idle(th)
		e.post(th, "two")
		e.idle(th)
		info, err := e.rt.ThreadInfo(context.Background(), th)
		if err != nil {
			t.Fatal(err)
		}
		if sb := info.SessionBudget; sb == nil || sb.TokensLimit != 2000 || sb.TokensSpent != 2200 || !sb.Over || sb.USDLimit != 0 {
			t.Fatalf("session budget after two completions = %+v; want 2,200 of 2,000 tokens spent, over", sb)
		}
		asked := len(e.model.requests())

		events, cancel := e.rt.Subscribe(th)
		defer cancel()
		e.post(th, "three")
		d := nextError(t, events)
		for _, want := range []string{"this session has used its budget", "2,200 tokens", "its budget is 2,000 tokens", `raise "session_budget" in rap.json and restart`} {
			if !strings.Contains(d.Message, want) {
				t.Errorf("error event %q; want it to say %q", d.Message, want)
			}
		}
		if d.RetryInMS != 0 {
			t.Errorf("error event %+v announces a retry; want none", d)
		}
		waitIdleFailed(t, e, th)
		if n := len(e.model.requests()); n != asked {
			t.Fatalf("the model was asked %d more times past the budget; want none", n-asked)
		}
		if q := queuedInputs(t, e, th); len(q) != 1 || q[0].Kind != store.KindUserMessage {
			t.Fatalf("queued inputs = %+v; want the message kept", q)
		}
		if hasText(e.history(th), store.RoleUser, "three") {
			t.Fatal("the message past the budget was saved to the history as if answered")
		}
		var timers []store.Timer
		e.rt.store.View(context.Background(), func(tx store.Tx) error {
			var err error
			timers, err = tx.DueTimers(time.Now().Add(time.Hour))
			return err
		})
		for _, tm := range timers {
			if tm.ThreadID == th {
				t.Fatalf("a timer %+v is set for the thread; want no retry", tm)
			}
		}
		if _, err := e.rt.CompactThread(context.Background(), th); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "budget") {
			t.Errorf("CompactThread = %v; want it refused for the budget (409)", err)
		}
		if pg {
			// The failed slice left the thread's lease to expire: the
			// sweep (every 50ms) then finds its queued message and no
			// holder, and must leave it alone.
			var until time.Time
			e.rt.store.View(context.Background(), func(tx store.Tx) error {
				_, until, _ = tx.(store.Leases).ThreadLease(th)
				return nil
			})
			for time.Now().Before(until.Add(10 * e.cfg.SweepEvery)) {
				time.Sleep(e.cfg.SweepEvery)
			}
		}
		if n := budgetFailures(e); n != 1 {
			t.Errorf("the budget stopped %d slices; want 1, the message's (no retry)", n)
		}
		if n := len(e.model.requests()); n != asked {
			t.Errorf("the model was asked %d more times past the budget; want none", n-asked)
		}

		// A new message is told again, and also kept.
		e.post(th, "four")
		waitIdleFailed(t, e, th)
		if n := budgetFailures(e); n != 2 {
			t.Errorf("the budget stopped %d slices after a second message; want 2", n)
		}
		if q := queuedInputs(t, e, th); len(q) != 2 {
			t.Errorf("queued inputs = %d; want both messages kept", len(q))
		}
	})
}

// The usage a budget counts is durable: after a restart with the same
// budget the queued message still gets the error and the model is not
// asked; a restart with a larger budget answers what waited, and a child
// thread's completions count for its session.
func TestSessionBudgetSurvivesRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, pg bool) {
		e := newEnv(t, envOptions{postgres: pg, model: echoWithUsage("anthropic:claude-sonnet-4-5"), tweak: func(c *Config) {
			c.SessionBudget = SessionBudget{Tokens: 3000}
			// A restarted process takes the thread once the lease the
			// stopped slice left has expired.
			c.LeaseTTL, c.SweepEvery = time.Second, 50*time.Millisecond
		}})
		th := e.newThread()
		e.post(th, "one")
		e.idle(th)
		// A child thread's completion, saved with its turn, counts for
		// the session: with the root's it makes 2,200 tokens.
		e.stop()
		e.offline(func(tx store.Tx) error {
			last, err := tx.LastSeq(th)
			if err != nil {
				return err
			}
			if err := tx.CreateThread(store.Thread{ID: th + "-c", ParentID: th, RootID: th, InheritSeq: last}); err != nil {
				return err
			}
			_, err = tx.AppendMessages(th+"-c", []store.Message{{Role: store.RoleAssistant, Text: "child",
				Usage: &store.Usage{InputTokens: 1000, OutputTokens: 100, Model: "anthropic:claude-sonnet-4-5"}}})
			return err
		})
		e.start()
		e.post(th, "two") // 3,300 tokens: over
		e.idle(th)
		e.post(th, "three")
		waitIdleFailed(t, e, th)
		asked := len(e.model.requests())

		e.restart()
		waitIdleFailed(t, e, th)
		if n := budgetFailures(e); n != 2 {
			t.Fatalf("the budget stopped %d slices; want 2, the message's before and after the restart", n)
		}
		if n := len(e.model.requests()); n != asked {
			t.Fatalf("the model was asked %d times after the restart; want none, the session is still over its budget", n-asked)
		}
		info, err := e.rt.ThreadInfo(context.Background(), th)
		if err != nil || info.SessionBudget == nil || info.SessionBudget.TokensSpent != 3300 || !info.SessionBudget.Over {
			t.Fatalf("session budget after the restart = %+v, %v; want 3,300 tokens spent, over", info.SessionBudget, err)
		}

		e.stop()
		e.cfg.SessionBudget = SessionBudget{Tokens: 10_000}
		e.start()
		e.waitHistory(th, "the waiting message answered", func(h []store.Message) bool {
			return hasText(h, store.RoleAssistant, "answer to three")
		})
		e.idle(th)
		if q := queuedInputs(t, e, th); len(q) != 0 {
			t.Errorf("queued inputs = %+v after the larger budget; want none", q)
		}
	})
}

// A slice that made a completion whose calls were all answered at once
// (here a call to a tool that does not exist) asks the model again only
// within the budget: past it, the turn is saved, and the completion it
// still needs waits in the inbox for a larger budget.
func TestSessionBudgetStopsWithinASlice(t *testing.T) {
	m := &usageModel{Provider: scripted.New([]scripted.Turn{
		{When: &scripted.When{UserContains: "go", LastInput: "user"}, Text: "trying", ToolCalls: []scripted.Call{call("no_such_tool", `{}`)}},
		{When: &scripted.When{LastResultContains: "no_such_tool"}, Text: "that tool does not exist", Repeat: true},
	}), u: model.Usage{InputTokens: 1000, OutputTokens: 100}}
	e := newEnv(t, envOptions{model: m, tweak: func(c *Config) { c.SessionBudget = SessionBudget{Tokens: 1000} }})
	th := e.newThread()
	e.post(th, "go")
	waitIdleFailed(t, e, th)
	if n := len(e.model.requests()); n != 1 {
		t.Fatalf("the model was asked %d times; want once, the second completion stopped by the budget", n)
	}
	h := e.history(th)
	if !hasText(h, store.RoleUser, "go") || !hasText(h, store.RoleAssistant, "trying") || len(results(h)) != 1 {
		t.Fatalf("history:\n%s\nwant the message, the turn and its rejected call saved", dump(h))
	}
	if q := queuedInputs(t, e, th); len(q) != 1 || q[0].Kind != store.KindWake {
		t.Fatalf("queued inputs = %+v; want one wake-up asking for the completion", q)
	}
	if n := budgetFailures(e); n != 1 {
		t.Errorf("the budget stopped %d slices; want 1", n)
	}
	e.stop()
	e.cfg.SessionBudget = SessionBudget{Tokens: 5000}
	e.start()
	e.waitHistory(th, "the completion that waited", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "that tool does not exist")
	})
}

// A budget in dollars counts each completion at the runtime's prices: a
// model the list does not know is priced by Config.Prices and held to
// the budget; one without any price is logged at start, named, and its
// spend is marked unpriced rather than counted as nothing.
func TestSessionBudgetInDollars(t *testing.T) {
	t.Run("priced by the config", func(t *testing.T) {
		e := newEnv(t, envOptions{model: echoWithUsage("openai:local-llm"), tweak: func(c *Config) {
			c.SessionBudget = SessionBudget{USD: 2}
			// $1.10 a completion: 1,000 input tokens at $1,000 and 100
			// output tokens at $1,000 a million.
			c.Prices = map[string]model.Price{"local-llm": {Input: 1000, Output: 1000}}
		}})
		th := e.newThread()
		for _, m := range []string{"one", "two"} {
			e.post(th, m)
			e.idle(th)
		}
		events, cancel := e.rt.Subscribe(th)
		defer cancel()
		e.post(th, "three")
		if d := nextError(t, events); !strings.Contains(d.Message, "cost about $2.2000") || !strings.Contains(d.Message, "its budget is $2.00") {
			t.Errorf("error event %q; want the spend ($2.2000) and the budget ($2.00)", d.Message)
		}
		if len(unpricedWarnings(e)) != 0 {
			t.Error("a model priced by the config is warned about as unpriced")
		}
		info, _ := e.rt.ThreadInfo(context.Background(), th)
		if sb := info.SessionBudget; sb == nil || sb.USDLimit != 2 || sb.USDSpent < 2.199 || sb.USDSpent > 2.201 || !sb.Over || sb.Unpriced {
			t.Errorf("session budget = %+v; want $2.20 of $2.00, over, priced", sb)
		}
	})
	t.Run("unpriced", func(t *testing.T) {
		e := newEnv(t, envOptions{model: echoWithUsage("openai:mystery-model"), tweak: func(c *Config) {
			c.SessionBudget = SessionBudget{USD: 0.01}
		}})
		recs := unpricedWarnings(e)
		if len(recs) != 1 || recs[0]["level"] != "WARN" || recs[0]["model"] != "openai:mystery-model" ||
			!strings.Contains(fmt.Sprint(recs[0]["msg"]), `the price of model openai:mystery-model is not known`) ||
			!strings.Contains(fmt.Sprint(recs[0]["msg"]), `"prices" in rap.json, such as "prices": {"mystery-model": {"input": 3, "output": 15}}`) {
			t.Fatalf("start-up warnings %v; want one naming the model and how to price it", recs)
		}
		th := e.newThread()
		for _, m := range []string{"one", "two"} {
			e.post(th, m)
			e.idle(th)
		}
		if n := len(e.model.requests()); n != 2 {
			t.Fatalf("the model was asked %d times; want 2 (its spend cannot be counted)", n)
		}
		info, _ := e.rt.ThreadInfo(context.Background(), th)
		if sb := info.SessionBudget; sb == nil || sb.USDSpent != 0 || !sb.Unpriced || sb.Over {
			t.Errorf("session budget = %+v; want nothing counted, marked unpriced", sb)
		}
	})
}

// unpricedWarnings returns the log records that say a model's price is
// not known.
func unpricedWarnings(e *env) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(e.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(fmt.Sprint(rec["msg"]), "the price of model ") {
			out = append(out, rec)
		}
	}
	return out
}

// New refuses a negative session budget and a bad price, naming them.
func TestSessionBudgetConfigChecked(t *testing.T) {
	for _, c := range []struct {
		tweak func(*Config)
		want  string
	}{
		{func(c *Config) { c.SessionBudget = SessionBudget{Tokens: -1} }, "SessionBudget is -1 tokens"},
		{func(c *Config) { c.Prices = map[string]model.Price{"m": {Input: -1}} }, `Prices: "m": input price -1`},
		{func(c *Config) { c.Prices = map[string]model.Price{"anthropic:m": {}} }, `Prices: "anthropic:m": write the model name without its provider`},
	} {
		cfg := Config{Store: nil, Model: scripted.New(nil), Secret: make([]byte, 32), PublicURL: "http://127.0.0.1:1"}
		c.tweak(&cfg)
		if _, err := New(&cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New = %v; want an error containing %q", err, c.want)
		}
	}
}
