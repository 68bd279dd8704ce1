package webui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime"
)

// moveScript is the scripted model of both runtimes of the move tests.
func moveScript() []scripted.Turn {
	return []scripted.Turn{
		{AfterUser: "hello", Text: "hi there"},
		{AfterUser: "still here?", Text: "yes, here"},
		{Text: "ok", Repeat: true},
	}
}

// newMoveStack is a runtime without tool servers, with one remote named
// eu-west that no test moves to.
func newMoveStack(t *testing.T) *stack {
	return newStack(t, stackOptions{model: scripted.New(moveScript()), configs: func(c *runtime.Config) {
		c.Remotes = map[string]runtime.Remote{"eu-west": {URL: "http://127.0.0.1:9", Token: "never-sent"}}
	}})
}

// openMoveDialog starts a session, says hello, opens "Move to…" and
// chooses "Another runtime…"; it returns the session's id.
func openMoveDialog(t *testing.T, b *browser, st *stack) string {
	t.Helper()
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.run("start a session", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the session is open and live", `!document.getElementById('thread').hidden && document.getElementById('conn').dataset.state === 'live'`)
	id := eval[string](b, `decodeURIComponent(location.hash.slice(4))`)
	b.say("hello")
	b.wait("the reply", contains(".msg.assistant", "hi there"))
	b.wait("the move button", `!document.getElementById('move-thread').hidden`)
	b.run("ask to move", chromedp.Click(chromedp.CSS("#move-thread")))
	b.wait("the move dialog, the remote chosen and focused", `document.getElementById('move-dialog').open && document.activeElement === document.getElementById('move-remote') && document.getElementById('move-remote').value === 'eu-west' && document.getElementById('move-url-field').hidden`)
	b.screenshot("webui-move")
	eval[bool](b, `(() => { const s = document.getElementById('move-remote'); s.value = ''; s.dispatchEvent(new Event('change')); return true })()`)
	b.wait("the address field", `!document.getElementById('move-url-field').hidden`)
	return id
}

// A session moves from the page to another runtime: the dialog offers
// the configured remotes and "Another runtime…" with an address; while
// the move runs its controls are disabled; once it is done the page says
// where the session went, links to it in the other runtime's web UI,
// takes no more messages, and the destination has the conversation. The
// source page, reloaded, says where the session went instead of an error,
// and the link opens the session at the destination.
func TestBrowserMoveSession(t *testing.T) {
	src, dst := newMoveStack(t), newMoveStack(t)
	b := newBrowser(t, 1024, 768)
	id := openMoveDialog(t, b, src)
	b.run("type the destination", chromedp.SendKeys(chromedp.CSS("#move-url"), dst.URL), chromedp.SendKeys(chromedp.CSS("#move-token"), "dest-token"))
	b.run("move", chromedp.Click(chromedp.CSS("#move-submit")))
	want := dst.URL + "/#/t/" + id
	b.wait("the page says the session moved, with a link to it",
		`!document.getElementById('move-dialog').open && !document.getElementById('moved-note').hidden && document.querySelector('#moved-note a')?.href === `+jsString(want))
	if !eval[bool](b, `document.getElementById('composer').hidden && document.getElementById('move-thread').hidden && document.getElementById('close-thread').hidden`) {
		t.Error("after the move the page still offers the message box, Move or Close")
	}
	if !eval[bool](b, `document.activeElement === document.querySelector('#moved-note a')`) {
		t.Error("after the move the focus is not on the link to the session's new place")
	}
	b.wait("the session is no longer listed here", `!document.querySelector('#thread-tree a[data-thread="`+id+`"]')`)
	if eval[bool](b, `!!document.querySelector('#messages .msg.error')`) {
		t.Errorf("the page shows an error after the move: %s", b.text("#messages .msg.error"))
	}
	b.screenshot("webui-moved")
	if got := b.text("#moved-note"); !strings.Contains(got, "moved to "+dst.URL) {
		t.Errorf("the note says %q; want it to name %s", got, dst.URL)
	}
	if eval[bool](b, `document.getElementById('move-token').value !== '' || JSON.stringify(sessionStorage).includes('dest-token') || JSON.stringify(localStorage).includes('dest-token')`) {
		t.Error("the destination's token was kept after the move")
	}
	if to, moved := src.RT.MovedTo(id); !moved || to != dst.URL {
		t.Errorf("the source says the session moved to %q (%v); want %s", to, moved, dst.URL)
	}
	if got := threadStatus(t, dst, id); got != "active" {
		t.Errorf("the session at the destination is %q; want active", got)
	}

	b.run("reload the source's page", chromedp.Reload())
	b.wait("the reloaded page says where the session went", `!document.getElementById('moved-note').hidden && document.getElementById('conn').dataset.state === 'moved' && document.querySelector('#moved-note a')?.href === `+jsString(want))
	if !eval[bool](b, `document.getElementById('toast').hidden`) {
		t.Errorf("the reloaded page shows an error: %s", b.text("#toast"))
	}
	b.run("follow the link", chromedp.Click(chromedp.CSS("#moved-note a")))
	b.waitAcrossNavigation("the session at the destination", `location.origin === `+jsString(dst.URL)+` && document.getElementById('conn').dataset.state === 'live'`)
	b.wait("its conversation", contains(".msg.assistant", "hi there"))
	b.say("still here?")
	b.wait("the destination answers", contains(".msg.assistant", "yes, here"))
}

// A move that fails leaves the session where it was: the dialog shows the
// runtime's reason and gives its controls back, and after Cancel the
// session goes on here.
func TestBrowserFailedMoveKeepsTheSession(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"the destination is out of disk"}`, http.StatusInternalServerError)
	}))
	t.Cleanup(refusing.Close)
	src := newMoveStack(t)
	b := newBrowser(t, 1024, 768)
	b.allowNetworkErrors.Store(true) // the move is answered 502
	id := openMoveDialog(t, b, src)
	b.run("type the destination", chromedp.SendKeys(chromedp.CSS("#move-url"), refusing.URL))
	b.run("move", chromedp.Click(chromedp.CSS("#move-submit")))
	b.wait("the reason, in the dialog", `document.getElementById('move-dialog').open && !document.getElementById('move-error').hidden`)
	if got := b.text("#move-error"); !strings.Contains(got, "stays here") || !strings.Contains(got, "out of disk") {
		t.Errorf("the dialog says %q; want that the session was not moved, and the destination's answer", got)
	}
	if !eval[bool](b, `![...document.querySelectorAll('#move-form button, #move-form input, #move-form select')].some(e => e.disabled) && document.getElementById('move-progress').textContent === ''`) {
		t.Error("after the failed move the dialog's controls are still disabled, or it still says moving")
	}
	if !eval[bool](b, `document.activeElement === document.getElementById('move-url')`) {
		t.Error("after the failed move the focus is not on the address to correct")
	}
	if _, moved := src.RT.MovedTo(id); moved {
		t.Fatal("the source says the session moved")
	}
	b.run("cancel", chromedp.Click(chromedp.CSS("#move-cancel")))
	b.wait("the dialog is gone and the session is as it was", `!document.getElementById('move-dialog').open && !document.getElementById('composer').hidden && document.getElementById('moved-note').hidden && !document.getElementById('move-thread').hidden`)
	b.say("still here?")
	b.wait("the session goes on here", contains(".msg.assistant", "yes, here"))
}

// waitAcrossNavigation polls a JavaScript expression until it is truthy,
// while the tab loads another page: an evaluation that fails because the
// page it ran in went away is tried again.
func (b *browser) waitAcrossNavigation(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(waitFor)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := evalJS[bool](ctx, "!!("+expr+")")
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("waiting until %s: not within %v (last error: %v)", what, waitFor, last)
}
