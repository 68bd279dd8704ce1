package webui_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// A thread is closed from the page after a confirmation: "Keep it open"
// changes nothing; "Close thread" closes it in the runtime, and the page
// then offers no message box and no close button, and lists the thread
// as closed.
func TestBrowserCloseThread(t *testing.T) {
	st := newDemoStack(t, nil, "")
	b := newBrowser(t, 1024, 768)
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.run("start a thread", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is open and live", `!document.getElementById('thread').hidden && document.getElementById('conn').dataset.state === 'live'`)
	root := eval[string](b, `decodeURIComponent(location.hash.slice(4))`)
	b.wait("the close button", `!document.getElementById('close-thread').hidden`)

	b.run("ask to close", chromedp.Click(chromedp.CSS("#close-thread")))
	b.wait("the confirmation", `document.getElementById('close-dialog').open`)
	b.run("keep it open", chromedp.Click(chromedp.CSS(`#close-dialog button[value="keep"]`)))
	b.wait("the confirmation is gone", `!document.getElementById('close-dialog').open`)
	if got := threadStatus(t, st, root); got != "active" {
		t.Fatalf("after \"Keep it open\" the thread is %q, want active", got)
	}

	b.run("ask again", chromedp.Click(chromedp.CSS("#close-thread")))
	b.wait("the confirmation", `document.getElementById('close-dialog').open`)
	b.run("close it", chromedp.Click(chromedp.CSS(`#close-dialog button[value="close"]`)))
	b.wait("the page shows it closed", `document.getElementById('composer').hidden && document.getElementById('close-thread').hidden && !!document.querySelector('#thread-info .closed-note')`)
	b.wait("the list shows it closed", `!!document.querySelector('#thread-tree a.closed[data-thread="`+root+`"]')`)
	if got := threadStatus(t, st, root); got != "closed" {
		t.Fatalf("after \"Close thread\" the thread is %q, want closed", got)
	}
}

// threadStatus reads the thread's status from the runtime's Go API.
func threadStatus(t *testing.T, st *stack, id string) string {
	t.Helper()
	info, err := st.RT.ThreadInfo(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return string(info.Status)
}
