package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// pricedModel is the scripted model reporting usage under the name of a
// model with a known price.
type pricedModel struct{ usageModel }

func (pricedModel) Name() string { return "anthropic:claude-sonnet-4-5" }

// budgetedServer serves a tool "fetch" whose definition carries budget
// (the annotation the tools.json bridge publishes).
func budgetedServer(t *testing.T, budget string) *toolServer {
	t.Helper()
	ts := newToolServer(t, "data", tool("fetch"))
	fetch := tool("fetch")
	fetch.Annotations = &rap.Annotations{Custom: map[string]json.RawMessage{AnnotationBudget: json.RawMessage(budget)}}
	ts.manifest, _ = json.Marshal(rap.Toolset{Name: "data", Endpoint: ts.URL() + "/invoke", Tools: []rap.Tool{fetch}})
	return ts
}

var budgetTurns = []scripted.Turn{
	{When: &scripted.When{UserContains: "fetch it", LastInput: "user"}, Text: "fetching", ToolCalls: []scripted.Call{call("fetch", `{}`)}, Repeat: true},
	{When: &scripted.When{LastResultContains: "budget"}, Text: "over budget", Repeat: true},
	{When: &scripted.When{LastResultContains: "DATA"}, Text: "got it", Repeat: true},
	{Text: "ok", Repeat: true},
}

// A tool's budget per session (seed 002: budget.tokens, budget.usd) holds:
// once its results took its tokens, or the turns that called it cost its
// dollars, a further call is not dispatched and the model gets an error
// result naming the budget and the spend.
func TestToolBudgetsHold(t *testing.T) {
	run := func(t *testing.T, budget string, m model.Provider, want string) {
		ts := budgetedServer(t, budget)
		var tweak func(*Config)
		if budget == "" { // the budget comes from the runtime's config
			ts = newToolServer(t, "data", tool("fetch"))
			tweak = func(c *Config) { c.ToolsetBudgets = map[string]ToolBudget{ts.URL(): {Tokens: 200}} }
		}
		e := newEnv(t, envOptions{model: m, servers: []string{ts.URL()}, tweak: tweak})
		th := e.newThread()
		e.post(th, "fetch it")
		reply(t, ts.next(), "DATA "+strings.Repeat("lorem ipsum ", 200))
		e.waitHistory(th, "the first fetch's answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got it") })
		e.idle(th)
		e.post(th, "fetch it")
		h := e.waitHistory(th, "the refused second fetch", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "over budget") })
		if n := len(ts.invocations()); n != 1 {
			t.Fatalf("the tool was invoked %d times; want once, the second call refused by its budget", n)
		}
		if countResults(h, want) != 1 {
			t.Fatalf("no error result saying %q:\n%s", want, dump(h))
		}
		info, err := e.rt.ThreadInfo(context.Background(), th)
		if err != nil || len(info.Budgets) != 1 || info.Budgets[0].Tool != "fetch" ||
			(info.Budgets[0].TokensLimit > 0 && info.Budgets[0].TokensSpent < info.Budgets[0].TokensLimit) ||
			(info.Budgets[0].USDLimit > 0 && info.Budgets[0].USDSpent < info.Budgets[0].USDLimit) {
			t.Fatalf("the session's budgets in its state = %+v, %v; want fetch's, spent", info.Budgets, err)
		}
	}
	t.Run("tokens", func(t *testing.T) {
		run(t, `{"tokens": 200}`, scripted.New(budgetTurns), "its budget is 200")
	})
	t.Run("tokens, from the toolset's entry", func(t *testing.T) {
		run(t, "", scripted.New(budgetTurns), "its budget is 200")
	})
	t.Run("dollars", func(t *testing.T) {
		m := &pricedModel{usageModel{Provider: scripted.New(budgetTurns), u: model.Usage{InputTokens: 1000, OutputTokens: 100}}}
		run(t, `{"usd": 0.001}`, m, "its budget is $0.0010")
	})
}
