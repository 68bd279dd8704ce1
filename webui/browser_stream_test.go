package webui_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
)

// gatedModel streams the first half of its answer to "slow", then waits
// for gate before it streams the rest; other messages go to the script.
type gatedModel struct {
	model.Provider
	gate chan struct{}
}

const (
	slowFirst  = "The quick brown fox "
	slowSecond = "jumps over the lazy dog."
)

func (m *gatedModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role != model.RoleUser || !strings.Contains(last.Text, "slow") {
		return m.Provider.Complete(ctx, req, s)
	}
	s.TextDelta(slowFirst)
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.TextDelta(slowSecond)
	return &model.Response{Text: slowFirst + slowSecond, StopReason: "end_turn"}, nil
}

// A stream that drops while the model is streaming is reconnected, and the
// answer appears once, whole, without duplicated text.
func TestBrowserReconnectMidStream(t *testing.T) {
	gate := make(chan struct{})
	st := newStack(t, stackOptions{model: &gatedModel{Provider: scripted.New(demoScript()), gate: gate}})
	b := newBrowser(t, 1024, 768)
	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is live", `document.getElementById('conn').dataset.state === 'live'`)
	b.say("tell me a slow story")
	b.wait("the first half streaming", contains(".msg.streaming", slowFirst))

	if n := st.DropStreams(); n == 0 {
		t.Fatal("no event stream to drop")
	}
	// The page resumes after the last event id it saw (Last-Event-ID):
	// the runtime sends only what it missed, so the half-streamed text
	// stays, once.
	b.wait("the page resumed", `document.getElementById('conn').dataset.state === 'live' && Number(document.getElementById('conn').dataset.connects) >= 2 && document.getElementById('conn').dataset.mode === 'resume'`)
	if n := eval[int](b, `document.getElementById('messages').textContent.split(`+jsString(slowFirst)+`).length - 1`); n != 1 {
		t.Errorf("after the reconnection the page shows the streamed text %d times, want once", n)
	}
	b.wait("the streamed text is still there", contains(".msg.streaming", slowFirst))
	close(gate)
	b.wait("the whole answer", contains(".msg.assistant:not(.streaming)", slowFirst+slowSecond)+` && !document.querySelector('.msg.streaming')`)
	text := eval[string](b, `document.getElementById('messages').textContent`)
	if n := strings.Count(text, slowFirst); n != 1 {
		t.Errorf("the answer's beginning appears %d times:\n%s", n, text)
	}
	if n := strings.Count(text, slowSecond); n != 1 {
		t.Errorf("the answer's end appears %d times:\n%s", n, text)
	}
	if n := strings.Count(text, "tell me a slow story"); n != 1 {
		t.Errorf("the question appears %d times:\n%s", n, text)
	}
}

// After the runtime restarts, the event ids the page holds cannot be
// resumed: the runtime answers with a reset and replays the thread, and
// the page rebuilds the view from it, every message once.
func TestBrowserResetAfterRestart(t *testing.T) {
	st := newDemoStack(t, nil, "")
	id := converse(t, st, "please edit main.go")
	b := newBrowser(t, 1024, 768)
	b.run("open the thread", chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the replayed conversation", contains(".msg.assistant", "Done: main.go now greets the world.")+` && document.getElementById('conn').dataset.mode === 'replay'`)
	b.wait("a live event with an id", `!!document.querySelector('#views .view[data-view="build"]')`)

	b.allowNetworkErrors.Store(true) // reconnections during the restart get 503
	st.Restart()
	b.wait("the page was reset and replayed", `document.getElementById('conn').dataset.mode === 'reset' && document.getElementById('conn').dataset.state === 'live'`)
	b.wait("the conversation again", contains(".msg.assistant", "Done: main.go now greets the world.")+` && !!document.querySelector('.diff-block')`)
	b.say("take a nap")
	b.wait("a live turn after the reset", contains("#thread-info .sleeping", "Sleeping until"))
	text := eval[string](b, `document.getElementById('messages').textContent`)
	for _, s := range []string{"please edit main.go", "Done: main.go now greets the world.", "take a nap", "+// Greets the world."} {
		if n := strings.Count(text, s); n != 1 {
			t.Errorf("%q is shown %d times, want once:\n%s", s, n, text)
		}
	}
}
