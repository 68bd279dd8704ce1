package webui_test

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// converse sends text to a new thread of st and waits until the thread is
// idle; it returns the thread's id.
func converse(t *testing.T, st *stack, texts ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	id, err := st.RT.CreateThread(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range texts {
		if err := st.RT.PostMessage(ctx, id, text); err != nil {
			t.Fatal(err)
		}
		if err := st.RT.Idle(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// At phone width (390 CSS pixels) the page fits without sideways
// scrolling, the thread's actions included, the thread list hides behind
// a menu button that the keyboard opens and Escape closes.
func TestBrowserPhoneWidth(t *testing.T) {
	st := newDemoStack(t, nil, "")
	id := converse(t, st, "please edit main.go")
	b := newBrowser(t, 390, 844)
	b.run("open the thread", chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the conversation", contains(".msg.assistant", "Done: main.go now greets the world.")+` && !!document.querySelector('.diff-block')`)
	b.wait("the thread list is hidden behind the menu button", `getComputedStyle(document.getElementById('menu')).display !== 'none' && getComputedStyle(document.getElementById('sidebar')).visibility === 'hidden'`)
	if w := eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %d pixels wide at a 390-pixel viewport: it scrolls sideways", w)
	}
	if w := eval[int](b, `Math.round(document.querySelector('#composer').getBoundingClientRect().right)`); w > 390 {
		t.Errorf("the message box ends at x=%d, beyond the 390-pixel viewport", w)
	}
	b.wait("the thread's actions", `!document.getElementById('rename-thread').hidden`)
	if out := eval[[]string](b, `[...document.querySelectorAll('.thread-actions button')].filter(e => !e.hidden && e.getBoundingClientRect().right > 390).map(e => e.textContent)`); len(out) > 0 {
		t.Errorf("the thread's actions %q end beyond the 390-pixel viewport", out)
	}
	b.screenshot("webui-phone")

	b.run("open the menu with the keyboard", chromedp.Focus(chromedp.CSS("#menu")), chromedp.KeyEvent(kb.Enter))
	b.wait("the thread list is shown and focused", `getComputedStyle(document.getElementById('sidebar')).visibility === 'visible' && document.getElementById('sidebar').contains(document.activeElement) && document.getElementById('menu').getAttribute('aria-expanded') === 'true' && document.getElementById('sidebar').getBoundingClientRect().left === 0`)
	b.wait("the thread is listed", `!!document.querySelector('#thread-tree a[aria-current="page"]')`)
	b.screenshot("webui-phone-menu")
	b.run("close it with Escape", chromedp.KeyEvent(kb.Escape))
	b.wait("the thread list is hidden again, the focus back on the button", `getComputedStyle(document.getElementById('sidebar')).visibility === 'hidden' && document.activeElement === document.getElementById('menu')`)
}

// With a client token, the page asks for it once, keeps it in the tab's
// sessionStorage, sends it as a bearer token and never in a URL.
func TestBrowserAsksForTheToken(t *testing.T) {
	const token = "s3cret-client-token-for-the-test"
	st := newDemoStack(t, nil, token)
	id := converse(t, st, "please edit main.go")
	b := newBrowser(t, 1024, 768)
	b.allowNetworkErrors.Store(true) // the first requests are answered 401
	b.run("open the page", chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the token dialog", `document.getElementById('token-dialog').open`)
	b.run("give the token", chromedp.SendKeys(chromedp.CSS("#token-input"), token), chromedp.KeyEvent(kb.Enter))
	b.wait("the conversation", contains(".msg.assistant", "Done: main.go now greets the world.")+` && document.getElementById('conn').dataset.state === 'live'`)
	b.wait("the thread list", `!!document.querySelector('#thread-tree a[data-thread]')`)
	if got := eval[string](b, `sessionStorage.getItem('gorap.clientToken')`); got != token {
		t.Errorf("sessionStorage holds %q", got)
	}
	if eval[bool](b, `location.href.includes('s3cret') || performance.getEntriesByType('resource').some(e => e.name.includes('s3cret'))`) {
		t.Error("the token appeared in a URL")
	}
	// A reload of the tab keeps the token: no second question.
	b.run("reload", chromedp.Reload())
	b.wait("the conversation after the reload", contains(".msg.assistant", "Done: main.go now greets the world."))
	if eval[bool](b, `document.getElementById('token-dialog').open`) {
		t.Error("the page asked for the token again after a reload")
	}
}

// An address naming a thread the runtime does not know says so, once,
// instead of reconnecting for ever.
func TestBrowserUnknownThread(t *testing.T) {
	st := newDemoStack(t, nil, "")
	b := newBrowser(t, 1024, 768)
	b.allowNetworkErrors.Store(true) // the 404s
	b.run("open a thread that does not exist", chromedp.Navigate(st.URL+"/#/t/no-such-thread"))
	b.wait("the page says so", `document.getElementById('conn').dataset.state === 'gone' && !document.getElementById('toast').hidden && document.getElementById('toast').textContent.includes('no-such-thread')`)
}

// With the system set to dark, the page is dark too.
func TestBrowserDarkMode(t *testing.T) {
	st := newDemoStack(t, nil, "")
	id := converse(t, st, "please edit main.go")
	b := newBrowser(t, 1024, 700)
	dark := chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	})
	b.run("open the thread in dark mode", dark, chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the conversation", contains(".msg.assistant", "Done: main.go now greets the world."))
	if bg := eval[string](b, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(22, 24, 28)" {
		t.Errorf("the background is %s in dark mode, want rgb(22, 24, 28)", bg)
	}
	b.screenshot("webui-dark")
}
