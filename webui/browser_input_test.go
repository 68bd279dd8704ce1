package webui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// A user input (the user_input gorap extension) is shown as a form whose
// fields have labels, required markers and descriptions, passes the
// accessibility check, refuses what the runtime refuses with the reason
// shown in the form, and is sent with Enter: the tool gets the values
// with their types.
func TestBrowserUserInput(t *testing.T) {
	src := axeSource(t)
	st := newDemoStack(t, nil, "")
	b := newBrowser(t, 1280, 860)
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.run("start a thread", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is live", `document.getElementById('conn').dataset.state === 'live'`)
	b.say("sign me up")
	b.wait("the form", contains(`.input-form .prompt`, "Your details for the newsletter"))
	b.wait("the first field has the focus", `document.activeElement?.name === 'email'`)
	labels := eval[string](b, `[...document.querySelectorAll('.input-form label')].map(l => l.textContent + '>' + document.getElementById(l.htmlFor).name).join('|')`)
	if labels != "Email *>email|Copies>copies|Weekly>weekly|Topic *>topic" {
		t.Errorf("labels %q, want each field labelled by its title, required ones marked", labels)
	}
	if !eval[bool](b, `document.querySelector('.input-form [name=email]').required && document.querySelector('.input-form [name=email]').type === 'email' && document.querySelector('.input-form [name=topic]').value === 'rap'`) {
		t.Error("the email field is not a required email input, or the topic lacks its default")
	}
	if desc := b.text(`#` + eval[string](b, `document.querySelector('.input-form [name=email]').getAttribute('aria-describedby')`)); desc != "Where the newsletter goes" {
		t.Errorf("the email field is described by %q", desc)
	}
	if found := b.axeFindings(src); len(found) > 0 {
		t.Errorf("%d serious accessibility finding(s) with the form shown:\n%s", len(found), strings.Join(found, "\n"))
	}
	// A value the browser lets through but the tool's bounds refuse: the
	// runtime's reason is shown and the form stays. (The browser logs the
	// refused request.)
	b.allowNetworkErrors.Store(true)
	eval[bool](b, `document.querySelector('.input-form [name=copies]').removeAttribute('min'); true`)
	b.run("fill in", chromedp.SendKeys(chromedp.CSS(`.input-form [name=email]`), "ada@example.com"),
		chromedp.SendKeys(chromedp.CSS(`.input-form [name=copies]`), "0"), chromedp.KeyEvent(kb.Enter))
	b.wait("the refusal", contains(`.input-form .input-error`, "values.copies"))
	b.run("fix and send with Enter", chromedp.Focus(chromedp.CSS(`.input-form [name=copies]`)),
		chromedp.KeyEvent(kb.Backspace), chromedp.SendKeys(chromedp.CSS(`.input-form [name=copies]`), "2"),
		chromedp.Click(chromedp.CSS(`.input-form [name=weekly]`)), chromedp.Focus(chromedp.CSS(`.input-form [name=email]`)), chromedp.KeyEvent(kb.Enter))
	b.wait("the result", contains(".msg.assistant", `Result: signed up {"copies":2,"email":"ada@example.com","topic":"rap","weekly":true}.`))
	b.wait("the form is gone", `!document.querySelector('.input-form')`)
}
