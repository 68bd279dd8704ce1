package webui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
)

// usageModel is a model that reports the same token usage for every
// completion, as a real provider reports its own (the scripted model
// reports none).
type usageModel struct {
	model.Provider
	u model.Usage
}

func (m *usageModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	resp, err := m.Provider.Complete(ctx, req, s)
	if resp != nil {
		resp.Usage = m.u
	}
	return resp, err
}

// demoUsage is what every completion of withUsage costs.
var demoUsage = model.Usage{InputTokens: 12345, CachedInputTokens: 10000, CacheWriteInputTokens: 500, OutputTokens: 1234}

// withUsage is the demo's scripted model reporting demoUsage.
func withUsage() model.Provider {
	return &usageModel{Provider: scripted.New(demoScript()), u: demoUsage}
}

// usageLine is an expression: the token line under the title as the eye
// reads it (without the words for screen readers), "" while it is hidden.
const usageLine = `(() => { const d = document.getElementById('usage'); if (d.hidden) return '';
  const s = d.querySelector('summary').cloneNode(true); s.querySelectorAll('.sr-only').forEach(e => e.remove());
  return s.textContent; })()`

// The thread's header shows the tokens the thread used: hidden before the
// first completion, then the sums of its state, updated after each turn
// from the usage events, with the cached and cache-write input in words
// when opened; read again from the state after a reload; and on a
// session's root with child threads, the session's figure too.
func TestBrowserUsage(t *testing.T) {
	st := newDemoStackModel(t, nil, "", withUsage())
	b := newBrowser(t, 1280, 860)
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	b.run("start a thread", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is open and live", `!document.getElementById('thread').hidden && document.getElementById('conn').dataset.state === 'live'`)
	if got := eval[string](b, usageLine); got != "" {
		t.Errorf("before any completion the token line shows %q; want it hidden", got)
	}

	b.say("please edit main.go") // two completions: the call, then the reply
	b.wait("the reply", contains(".msg.assistant", "Done: main.go now greets the world."))
	b.wait("two completions' tokens", usageLine+` === '24.7k tokens in · 2.5k out'`)
	if got := b.text("#usage summary"); !strings.Contains(got, "Tokens used: ") || !strings.Contains(got, ", ") {
		t.Errorf("the token line reads %q to a screen reader; want it to say what the figures are, without the middle dots", got)
	}

	// A second turn: the figures grow with it, from its usage event alone
	// while the thread's state cannot be read.
	release := st.holdStateReads()
	b.say("deploy it")
	b.wait("the choice picker", contains(`.choice .prompt`, "Deploy where?"))
	b.wait("three completions' tokens", usageLine+` === '37.0k tokens in · 3.7k out'`)
	release()
	b.run("answer", chromedp.Click(chromedp.CSS(`.choice button.default`)))
	b.wait("the deployment's reply", contains(".msg.assistant", "Deployment finished"))
	b.wait("four completions' tokens", usageLine+` === '49.4k tokens in · 4.9k out'`)

	// The detail, opened with the keyboard, says the exact figures.
	b.run("open the detail", chromedp.Focus(chromedp.CSS("#usage summary")), chromedp.KeyEvent(kb.Enter))
	b.wait("the detail", `document.getElementById('usage').open`)
	want := "This thread: 49,380 input tokens (9,380 uncached, 40,000 read from the cache, 2,000 written to the cache), 4,936 output tokens."
	if got := b.text(`#usage-detail [data-usage="thread"]`); got != want {
		t.Errorf("the detail says %q; want %q", got, want)
	}
	if b.text(`#usage-detail [data-usage="session"]`) != "" {
		t.Error("a session without child threads shows a session figure")
	}

	// A reload reads the same sums from the thread's state.
	b.run("reload", chromedp.Reload())
	b.wait("the sums after a reload", usageLine+` === '49.4k tokens in · 4.9k out'`)

	// A subscription's events run in two child threads: their
	// completions count for the session, not the thread.
	b.say("watch the countdown")
	b.wait("two event threads", `document.querySelectorAll('#messages a[data-child]').length === 2`)
	b.wait("the subscription's completions", usageLine+`.startsWith('74.1k tokens in · 7.4k out')`)
	// Each child handles its event with one completion.
	b.wait("the session's figure, with its children's completions",
		usageLine+` === '74.1k tokens in · 7.4k out · session: 98.8k in · 9.9k out'`)
	b.run("open the detail", chromedp.Click(chromedp.CSS("#usage summary")))
	if got := b.text(`#usage-detail [data-usage="session"]`); !strings.HasPrefix(got, "The session (this thread and its child threads): 98,760 input tokens") {
		t.Errorf("the session's detail says %q", got)
	}

	// A child thread shows its own tokens, without the session's.
	child := eval[string](b, `document.querySelector('#messages a[data-child]').dataset.child`)
	b.run("follow the child", chromedp.Click(chromedp.CSS(`#messages a[data-child]`)))
	b.wait("the child's tokens", fmt.Sprintf(`document.getElementById('thread-title').title === %s && `, jsString(child))+usageLine+` === '12.3k tokens in · 1.2k out'`)
}

// holdStateReads makes the stack's GET /v1/threads/{id} wait until the
// function it returns is called (or the request ends): the page then
// learns about the thread from its event stream alone.
func (s *stack) holdStateReads() (release func()) {
	next := *s.handler.Load()
	held := make(chan struct{})
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/threads/")
		if ok && r.Method == http.MethodGet && rest != "" && !strings.Contains(rest, "/") {
			select {
			case <-held:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
	s.handler.Store(&h)
	var once sync.Once
	return func() { once.Do(func() { close(held) }) }
}
