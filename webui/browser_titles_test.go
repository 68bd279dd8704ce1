package webui_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
)

// startSession starts a session in st's runtime with its first message
// and returns its id.
func startSession(t *testing.T, st *stack, first string) string {
	t.Helper()
	id, err := st.RT.CreateThread(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RT.PostMessage(t.Context(), id, first); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	if err := st.RT.Idle(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// sessionInfo reads a thread's state from the runtime's Go API.
func sessionInfo(t *testing.T, st *stack, id string) api.ThreadInfo {
	t.Helper()
	info, err := st.RT.ThreadInfo(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// listedTitle is an expression: the title the thread list shows for the
// session id ("" when it is not listed).
func listedTitle(id string) string {
	return fmt.Sprintf(`(document.querySelector('#thread-tree a[data-thread=%s] .title-text')?.textContent ?? '')`, jsString(id))
}

// listedIDs is an expression: the ids of the sessions the list shows,
// newest first, joined by spaces.
const listedIDs = `[...document.querySelectorAll('#thread-tree > li > a')].map(a => a.dataset.thread).join(' ')`

// selectSearch selects the text of the search box, which keeps the focus.
const selectSearch = `document.getElementById('thread-search').select(); true`

// Sessions are listed and headed by their titles, derived from their first
// message; a session is renamed in place with the keyboard (Enter saves,
// Escape cancels, an empty title goes back to the derived one), and a
// rename by another client shows at once; the search box lists the
// sessions whose title or first message holds every word typed; a closed
// session is archived, which takes it out of the list until Show archived
// is ticked, and brought back.
func TestBrowserTitlesSearchArchive(t *testing.T) {
	st := newStack(t, stackOptions{model: scripted.New([]scripted.Turn{{Text: "Noted.", Repeat: true}})})
	deploy := startSession(t, st, "Deploy the payments service\nto production, please")
	budget := startSession(t, st, "Quarterly budget review")
	notes := startSession(t, st, "Write the release notes")
	if err := st.RT.CloseThread(t.Context(), notes); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, 1280, 860)
	b.run("open the page", chromedp.Navigate(st.URL+"/#/t/"+deploy), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.wait("the list shows the titles", listedTitle(deploy)+` === 'Deploy the payments service' && `+listedTitle(budget)+` === 'Quarterly budget review'`)
	b.wait("the header shows the session's title", `document.querySelector('#thread-title .title-text')?.textContent === 'Deploy the payments service' && !document.getElementById('rename-thread').hidden`)
	b.screenshot("webui-titles")

	// Rename with the keyboard: Enter on Rename opens the title, selected,
	// in a text box; typing replaces it; Enter saves.
	b.run("rename", chromedp.Focus(chromedp.CSS("#rename-thread")), chromedp.KeyEvent(kb.Enter))
	b.wait("the title in a text box, with the focus", `document.activeElement === document.getElementById('title-input') && document.getElementById('title-input').value === 'Deploy the payments service' && document.getElementById('thread-title').hidden`)
	b.run("type the new title", chromedp.KeyEvent("Payments rollout"))
	b.screenshot("webui-rename")
	b.run("save it with Enter", chromedp.KeyEvent(kb.Enter))
	b.wait("the new title in the header, the focus back on Rename", `document.querySelector('#thread-title .title-text')?.textContent === 'Payments rollout' && !document.getElementById('thread-title').hidden && document.activeElement === document.getElementById('rename-thread')`)
	b.wait("the new title in the list", listedTitle(deploy)+` === 'Payments rollout'`)
	if got := sessionInfo(t, st, deploy).Title; got != "Payments rollout" {
		t.Errorf("after the rename the runtime has title %q", got)
	}
	// Escape leaves the title as it was.
	b.run("rename again", chromedp.KeyEvent(kb.Enter))
	b.wait("the text box", `document.activeElement === document.getElementById('title-input')`)
	b.run("type, then Escape", chromedp.KeyEvent("Not this"), chromedp.KeyEvent(kb.Escape))
	b.wait("the title unchanged, the focus back on Rename", `document.querySelector('#thread-title .title-text')?.textContent === 'Payments rollout' && document.getElementById('title-form').hidden && document.activeElement === document.getElementById('rename-thread')`)
	if got := sessionInfo(t, st, deploy).Title; got != "Payments rollout" {
		t.Errorf("after Escape the runtime has title %q", got)
	}
	// An empty title goes back to the one derived from the first message.
	b.run("rename to nothing", chromedp.KeyEvent(kb.Enter))
	b.wait("the text box", `document.activeElement === document.getElementById('title-input')`)
	b.run("empty it and save", chromedp.KeyEvent(kb.Delete), chromedp.KeyEvent(kb.Enter))
	b.wait("the derived title again", `document.querySelector('#thread-title .title-text')?.textContent === 'Deploy the payments service' && `+listedTitle(deploy)+` === 'Deploy the payments service'`)

	// Another client renames the session: the header and the list follow.
	if _, err := st.RT.UpdateThread(t.Context(), deploy, api.UpdateThreadRequest{Title: new("Renamed elsewhere")}); err != nil {
		t.Fatal(err)
	}
	b.wait("the other client's title", `document.querySelector('#thread-title .title-text')?.textContent === 'Renamed elsewhere' && `+listedTitle(deploy)+` === 'Renamed elsewhere'`)

	// Search: every word, in any case, in the title or the first message.
	b.run("search", chromedp.Focus(chromedp.CSS("#thread-search")), chromedp.KeyEvent("BUDGET quarterly"))
	b.wait("only the budget session", listedIDs+` === `+jsString(budget))
	eval[bool](b, selectSearch)
	b.run("search the first message of a renamed session", chromedp.KeyEvent("production"))
	b.wait("the renamed session, by its first message", listedIDs+` === `+jsString(deploy))
	eval[bool](b, selectSearch)
	b.run("search for nothing there", chromedp.KeyEvent("zebra"))
	b.wait("no session, and a note saying so", listedIDs+` === '' && !document.getElementById('no-threads').hidden && document.getElementById('no-threads').textContent.includes('zebra')`)
	eval[bool](b, selectSearch)
	b.run("clear the search", chromedp.KeyEvent(kb.Delete))
	b.wait("every session again", listedIDs+` === `+jsString(notes+" "+budget+" "+deploy))

	// Archive the closed session, with the keyboard.
	b.run("open the closed session", chromedp.Click(chromedp.CSS(`#thread-tree a[data-thread="`+notes+`"]`)))
	b.wait("its Archive action", `document.querySelector('#thread-title .title-text')?.textContent === 'Write the release notes' && !document.getElementById('archive-thread').hidden && document.getElementById('archive-thread').textContent === 'Archive'`)
	b.run("archive it", chromedp.Focus(chromedp.CSS("#archive-thread")), chromedp.KeyEvent(kb.Enter))
	b.wait("it is archived and left out of the list", `document.getElementById('archive-thread').textContent === 'Unarchive' && !!document.querySelector('#thread-title .badge.archived') && `+listedIDs+` === `+jsString(budget+" "+deploy))
	if !sessionInfo(t, st, notes).Archived {
		t.Error("after Archive the runtime does not have the session archived")
	}
	b.run("show archived sessions", chromedp.Click(chromedp.CSS("#show-archived")))
	b.wait("the archived session listed, marked", listedIDs+` === `+jsString(notes+" "+budget+" "+deploy)+` && `+contains(`#thread-tree a[data-thread="`+notes+`"] .badge`, "archived"))
	b.screenshot("webui-archived")
	b.run("bring it back", chromedp.Focus(chromedp.CSS("#archive-thread")), chromedp.KeyEvent(kb.Enter))
	b.wait("it is back", `document.getElementById('archive-thread').textContent === 'Archive' && !document.querySelector('#thread-title .badge.archived') && !document.querySelector('#thread-tree a.archived')`)
	b.run("hide archived sessions", chromedp.Click(chromedp.CSS("#show-archived")))
	b.wait("every session listed", listedIDs+` === `+jsString(notes+" "+budget+" "+deploy))
	if sessionInfo(t, st, notes).Archived {
		t.Error("after Unarchive the runtime has the session archived")
	}

	// A title over the limit is refused, and the text box says why.
	b.run("rename to a title too long", chromedp.Focus(chromedp.CSS("#rename-thread")), chromedp.KeyEvent(kb.Enter))
	b.wait("the text box", `document.activeElement === document.getElementById('title-input')`)
	eval[bool](b, `document.getElementById('title-input').removeAttribute('maxlength'); document.getElementById('title-input').value = 'x'.repeat(201); true`)
	b.allowNetworkErrors.Store(true) // the browser logs the 400
	b.run("save it", chromedp.KeyEvent(kb.Enter))
	b.wait("the refusal, naming the limit", `!document.getElementById('title-error').hidden && document.getElementById('title-error').textContent.includes('the limit is 200') && document.activeElement === document.getElementById('title-input')`)
	if got := sessionInfo(t, st, notes).Title; got != "Write the release notes" {
		t.Errorf("after the refused rename the runtime has title %q", got)
	}
}

// A new session's title comes from its first message, in the header and
// the list, as soon as it is sent.
func TestBrowserTitleFromFirstMessage(t *testing.T) {
	st := newStack(t, stackOptions{model: scripted.New([]scripted.Turn{{Text: "Noted.", Repeat: true}})})
	b := newBrowser(t, 1024, 768)
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.run("start a thread", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is open and live", `!document.getElementById('thread').hidden && document.getElementById('conn').dataset.state === 'live'`)
	root := eval[string](b, `decodeURIComponent(location.hash.slice(4))`)
	b.wait("an untitled session", `document.querySelector('#thread-title .untitled')?.textContent === 'Untitled session'`)
	b.say("Plan the team offsite in a quiet place near a lake, with good food and a long walk")
	b.wait("the derived title in the header and the list",
		`document.querySelector('#thread-title .title-text')?.textContent === 'Plan the team offsite in a quiet place near a lake, with…' && `+
			listedTitle(root)+` === 'Plan the team offsite in a quiet place near a lake, with…'`)
}
