package webui_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gorap/gorap/model"
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
// WCAG rules) in the states a person meets first: the empty page, the
// thread list searched without a match, a conversation with tool calls and
// results and the tokens it used (its detail opened), its title being
// renamed, its tools' budgets (one spent) opened, the Compact action's
// outcome and a compaction's divider with its summary open, a user
// choice, the dialog that confirms closing a thread, the dialog that moves
// a session (with an error), and an archived session listed beside a
// message shown queued; in light and in dark mode.
func TestBrowserAccessibility(t *testing.T) {
	src := axeSource(t)
	m := &holdingModel{Provider: withUsage()}
	st := newDemoStackModel(t, nil, "", m, withBudgets(5, 0))
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
		b.run("search the threads", chromedp.Focus(chromedp.CSS("#thread-search")), chromedp.KeyEvent("nothing like it"), chromedp.Click(chromedp.CSS("#show-archived")))
		b.wait("no match", `!document.getElementById('no-threads').hidden && document.getElementById('no-threads').textContent.includes('nothing like it')`)
		check("a search without a match, archived sessions shown")
		eval[bool](b, `document.getElementById('thread-search').select(); true`)
		b.run("clear the search", chromedp.KeyEvent(kb.Delete), chromedp.Click(chromedp.CSS("#show-archived")))
		b.wait("the whole list", `document.getElementById('no-threads').hidden && !document.getElementById('show-archived').checked`)
		b.run("open the conversation", chromedp.Navigate(st.URL+"/#/t/"+id))
		b.wait("the conversation", contains(".msg.assistant", "Done: main.go now greets the world."))
		b.wait("the tokens used", `!document.getElementById('usage').hidden`)
		b.wait("the session's title", `document.querySelector('#thread-title .title-text')?.textContent === 'please edit main.go'`)
		check("a conversation")
		b.run("rename", chromedp.Click(chromedp.CSS("#rename-thread")))
		b.wait("the title's text box", `document.activeElement === document.getElementById('title-input')`)
		check("the title being renamed")
		b.run("cancel the rename", chromedp.KeyEvent(kb.Escape))
		b.wait("the title again", `document.getElementById('title-form').hidden`)
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
		// The message's queued copy, drawn dashed, is gone once it is saved.
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
		b.run("cancel the move", chromedp.Click(chromedp.CSS("#move-cancel")))
		b.wait("the dialog is closed", `!document.getElementById('move-dialog').open`)
		// A session archived, its list with archived sessions shown, and a
		// message the model failed on, shown queued until it is retried.
		b.run("archive the session", chromedp.Click(chromedp.CSS("#archive-thread")))
		b.wait("archived", `!!document.querySelector('#thread-title .badge.archived')`)
		b.run("list archived sessions too", chromedp.Click(chromedp.CSS("#show-archived")))
		b.wait("the archived session listed", `!!document.querySelector('#thread-tree a.archived')`)
		b.run("start another thread", chromedp.Click(chromedp.CSS("#new-thread")))
		b.wait("the new thread is live", `location.hash !== '#/t/'+`+jsString(id)+` && document.getElementById('conn').dataset.state === 'live'`)
		m.hold()
		// The first message is taken (announced) while the model thinks;
		// the second waits, queued, behind it.
		b.say("hold on")
		b.wait("the message taken", `[...document.querySelectorAll('#messages > .msg.user:not([data-queued]) .text')].some((e) => e.textContent === 'hold on')`)
		// The new thread's view may still be settling on its address.
		b.wait("the message box ready", `(() => {
			const i = document.getElementById('input');
			return !!i && !i.disabled && i.checkVisibility() && document.getElementById('conn').dataset.state === 'live';
		})()`)
		b.say("and then?")
		b.wait("the message queued while the model thinks", contains("#messages > .msg.user[data-queued] .meta", "queued"))
		check("an archived session listed, a message queued")
		m.release()
		b.wait("the message saved", `!document.querySelector('#messages [data-queued]')`)
		b.run("bring the session back", chromedp.Navigate(st.URL+"/#/t/"+id))
		b.wait("its Unarchive action", `document.getElementById('archive-thread').textContent === 'Unarchive'`)
		b.run("unarchive", chromedp.Click(chromedp.CSS("#archive-thread")))
		b.wait("back", `document.getElementById('archive-thread').textContent === 'Archive'`)
	}
}

// holdingModel is a model whose completions for a last user message
// "hold on" wait, after hold, until release: a message sent meanwhile
// stays queued.
type holdingModel struct {
	model.Provider
	mu   sync.Mutex
	gate chan struct{}
}

func (m *holdingModel) hold() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gate = make(chan struct{})
}

func (m *holdingModel) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gate != nil {
		close(m.gate)
		m.gate = nil
	}
}

func (m *holdingModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleUser && req.Messages[n-1].Text == "hold on" {
		m.mu.Lock()
		gate := m.gate
		m.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &model.Response{Text: "Thanks for waiting."}, nil
	}
	return m.Provider.Complete(ctx, req, s)
}
