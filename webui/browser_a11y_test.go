package webui_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// axeSource is axe-core, the accessibility checker, from the npm package
// pinned in testdata/axe (npm ci there installs it; CI does).
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "axe", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("GORAP_REQUIRE_NPM") != "" {
			t.Fatalf("axe-core is not installed (run npm ci in webui/testdata/axe): %v", err)
		}
		t.Skipf("axe-core is not installed (run npm ci in webui/testdata/axe): %v", err)
	}
	return string(b)
}

// axeFindings runs axe-core on the page as it is and returns its serious
// and critical findings, one line each: rule, impact, help, and the first
// elements concerned.
func (b *browser) axeFindings(src string) []string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](src+";true")); err != nil {
		b.t.Fatalf("load axe-core: %v", err)
	}
	const run = `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
	  .filter(v => v.impact === 'serious' || v.impact === 'critical')
	  .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' — ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', ')))`
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](run, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("run axe-core: %v", err)
	}
	return found
}

// The page has no serious or critical accessibility finding (axe-core's
// WCAG rules) in the states a person meets first: the empty page, a
// conversation with tool calls and results and the tokens it used (its
// detail opened), its tools' budgets (one spent) opened, the Compact action's outcome and a compaction's divider
// with its summary open, a user choice, the dialog that confirms closing a
// thread, and the dialog that moves a session (with an error); in light
// and in dark mode.
func TestBrowserAccessibility(t *testing.T) {
	src := axeSource(t)
	st := newDemoStackModel(t, nil, "", withUsage(), withBudgets(5, 0))
	id := converse(t, st, "please edit main.go")
	for _, dark := range []bool{false, true} {
		b := newBrowser(t, 1280, 860)
		if dark {
			b.run("dark mode", chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
				_, err := cdp.Call(ctx, target, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
					Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
				})
				return err
			}))
		}
		check := func(state string) {
			t.Helper()
			if found := b.axeFindings(src); len(found) > 0 {
				t.Errorf("dark=%v, %s: %d serious accessibility finding(s):\n%s", dark, state, len(found), strings.Join(found, "\n"))
			}
		}
		b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
		check("the empty page")
		b.run("open the conversation", chromedp.Navigate(st.URL+"/#/t/"+id))
		b.wait("the conversation", contains(".msg.assistant", "Done: main.go now greets the world."))
		b.wait("the tokens used", `!document.getElementById('usage').hidden`)
		check("a conversation")
		b.run("open the tokens' detail", chromedp.Click(chromedp.CSS("#usage summary")))
		b.wait("the detail", `document.getElementById('usage').open`)
		check("the tokens' detail")
		b.run("open the budgets", chromedp.Click(chromedp.CSS("#budgets summary")))
		b.wait("the budgets, one spent", `document.getElementById('budgets').open && !!document.querySelector('#budgets-detail li.over')`)
		check("the tools' budgets")
		if !dark {
			b.run("compact", chromedp.Click(chromedp.CSS("#compact-thread")))
			b.wait("the outcome", contains("#compact-status", "Compacted 2 earlier messages"))
		}
		// In dark mode, the divider comes from the history.
		b.wait("the divider", `!!document.querySelector('#messages .compaction summary')`)
		b.run("open the summary", chromedp.Focus(chromedp.CSS("#messages .compaction summary")), chromedp.KeyEvent(kb.Enter))
		b.wait("the summary", `document.querySelector('#messages .compaction details').open`)
		check("a compaction, its summary open")
		b.say("deploy it")
		b.wait("the choice picker", contains(`.choice .prompt`, "Deploy where?"))
		// The message's queued copy, drawn faded, is gone once it is saved.
		b.wait("the message saved", `!document.querySelector('#messages [data-queued]')`)
		check("a user choice")
		b.run("ask to close", chromedp.Click(chromedp.CSS("#close-thread")))
		b.wait("the confirmation", `document.getElementById('close-dialog').open`)
		check("the close confirmation")
		b.run("keep it open", chromedp.Click(chromedp.CSS(`#close-dialog button[value="keep"]`)))
		b.run("ask to move", chromedp.Click(chromedp.CSS("#move-thread")))
		// Without remotes the dialog asks for an address alone.
		b.wait("the move dialog", `document.getElementById('move-dialog').open && document.getElementById('move-remote-field').hidden && document.activeElement === document.getElementById('move-url')`)
		check("the move dialog")
		b.run("move nowhere", chromedp.Click(chromedp.CSS("#move-submit")))
		b.wait("the dialog says what is missing", `!document.getElementById('move-error').hidden && document.activeElement === document.getElementById('move-url')`)
		check("the move dialog with an error")
	}
}
