package webui_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime"
)

// pricedUsageModel is withUsage under the name of a model with a known
// price, so that a turn's cost counts against a budget in dollars.
type pricedUsageModel struct{ *usageModel }

func (pricedUsageModel) Name() string { return "anthropic:claude-sonnet-4-5" }

// withBudgets gives each tool of the demo tool server a budget per
// session of tokens and dollars.
func withBudgets(tokens int64, usd float64) func(*runtime.Config) {
	return func(c *runtime.Config) {
		c.ToolsetBudgets = map[string]runtime.ToolBudget{c.ToolServers[0]: {Tokens: tokens, USD: usd}}
	}
}

// budgetRow is an expression: the text of the budget line of tool, ""
// while there is none or the budgets are hidden.
func budgetRow(tool string) string {
	return fmt.Sprintf(`(() => { if (document.getElementById('budgets').hidden) return '';
  const li = document.querySelector('#budgets-detail li[data-budget=' + %s + ']'); return li ? li.textContent : ''; })()`,
		jsString(jsString(tool)))
}

// On a session's root thread the budgets of its tools are listed under
// the title: what each spent of its tokens and dollars, a spent budget
// marked "(over)" in words and counted in the summary; read again from
// the thread's state after the turn and after a reload, and absent on a
// stack whose tools have no budget.
func TestBrowserBudgets(t *testing.T) {
	m := pricedUsageModel{&usageModel{Provider: scripted.New(demoScript()), u: demoUsage}}
	st := newDemoStackModel(t, nil, "", m, withBudgets(5, 10))
	b := newBrowser(t, 1280, 860)
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.run("start a thread", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is open and live", `!document.getElementById('thread').hidden && document.getElementById('conn').dataset.state === 'live'`)

	b.say("please edit main.go")
	b.wait("the reply", contains(".msg.assistant", "Done: main.go now greets the world."))
	b.wait("edit_file over its budget", budgetRow("edit_file")+`.includes('(over)')`)
	id := strings.TrimPrefix(eval[string](b, `location.hash`), "#/t/")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	info, err := st.RT.ThreadInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var spent int64
	for _, bu := range info.Budgets {
		if bu.Tool == "edit_file" {
			spent = bu.TokensSpent
		}
	}
	if spent < 5 {
		t.Fatalf("the runtime reports budgets %+v; want edit_file past its 5 tokens", info.Budgets)
	}
	row := regexp.MustCompile(fmt.Sprintf(`^edit_file: %d of 5 tokens \(over\), \$0\.0[0-9]{3} of \$10\.00$`, spent))
	if got := eval[string](b, budgetRow("edit_file")); !row.MatchString(got) {
		t.Errorf("edit_file's budget reads %q; want it to match %s", got, row)
	}
	if got, want := eval[string](b, budgetRow("deploy")), "deploy: 0 of 5 tokens, $0.00 of $10.00"; got != want {
		t.Errorf("deploy's budget reads %q; want %q", got, want)
	}
	if got, want := b.text("#budgets summary"), "Budgets: 5 tools, 1 over budget"; got != want {
		t.Errorf("the budgets' summary reads %q; want %q", got, want)
	}
	if eval[bool](b, `document.querySelector('#budgets-detail li[data-budget="deploy"]').classList.contains('over')`) {
		t.Error("deploy, within its budget, is marked over")
	}

	b.run("reload", chromedp.Reload())
	b.wait("the budgets after a reload", budgetRow("edit_file")+`.includes('(over)')`)
	b.run("open the budgets", chromedp.Click(chromedp.CSS("#budgets summary")))
	b.wait("the detail open", `document.getElementById('budgets').open && document.querySelector('#budgets-detail li[data-budget="edit_file"]').getClientRects().length > 0`)

	// Tools without a budget: no budgets at all.
	plain := newDemoStackModel(t, nil, "", withUsage())
	pid := converse(t, plain, "please edit main.go")
	b.run("open a thread without budgets", chromedp.Navigate(plain.URL+"/#/t/"+pid))
	b.wait("its tokens", `!document.getElementById('usage').hidden`)
	if !eval[bool](b, `document.getElementById('budgets').hidden`) {
		t.Errorf("budgets are shown on a session whose tools have none: %q", b.text("#budgets"))
	}
}

// sessionBudgetRow is an expression: the text of the session's budget
// line, "" while there is none or the budgets are hidden.
const sessionBudgetRow = `(() => { if (document.getElementById('budgets').hidden) return '';
  const li = document.querySelector('#budgets-detail li[data-session-budget]'); return li ? li.textContent : ''; })()`

// On a session's root thread the session's own budget is listed first
// with what the session spent, marked "(over)" once spent and counted in
// the summary; a message past it is answered by the runtime's error,
// which says what to do.
func TestBrowserSessionBudget(t *testing.T) {
	m := &usageModel{Provider: scripted.New([]scripted.Turn{{Text: "noted: {{last_user}}", Repeat: true}}), u: demoUsage}
	st := newDemoStackModel(t, nil, "", m, func(c *runtime.Config) { c.SessionBudget = runtime.SessionBudget{Tokens: 20000} })
	b := newBrowser(t, 1280, 860)
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.run("start a thread", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is open and live", `!document.getElementById('thread').hidden && document.getElementById('conn').dataset.state === 'live'`)

	b.say("one")
	b.wait("the first reply", contains(".msg.assistant", "noted: one"))
	b.wait("the session's budget, not spent", sessionBudgetRow+` === 'This session: 13,579 of 20,000 tokens'`)
	if got, want := b.text("#budgets summary"), "Budgets: this session"; got != want {
		t.Errorf("the budgets' summary reads %q; want %q", got, want)
	}
	b.say("two")
	b.wait("the second reply", contains(".msg.assistant", "noted: two"))
	b.wait("the session over its budget", sessionBudgetRow+` === 'This session: 27,158 of 20,000 tokens (over)'`)
	if got, want := b.text("#budgets summary"), "Budgets: this session, 1 over budget"; got != want {
		t.Errorf("the budgets' summary reads %q; want %q", got, want)
	}
	b.say("three")
	b.wait("the runtime's error", contains(".msg.error", `raise "session_budget" in rap.json and restart rap serve`))
	if eval[bool](b, `[...document.querySelectorAll('.msg.assistant')].some(e => e.textContent.includes('noted: three'))`) {
		t.Error("the message past the budget was answered")
	}
}
