package webui_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
)

// causeModel streams the first half of its reply to a tool result, or to
// a message saying "slow", then waits for gate before the rest; other
// turns go to the script.
type causeModel struct {
	model.Provider
	gate chan struct{}
}

const (
	replyFirst  = "The answer is "
	replySecond = "forty-two."
)

func (m *causeModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if len(last.ToolResults) == 0 && !strings.Contains(last.Text, "slow") {
		return m.Provider.Complete(ctx, req, s)
	}
	s.TextDelta(replyFirst)
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.TextDelta(replySecond)
	return &model.Response{Text: replyFirst + replySecond, StopReason: "end_turn"}, nil
}

// The runtime announces what a completion answers before the completion
// streams: the page streams every reply in sight, under its cause,
// whether the cause is a tool result, another client's message or the
// page's own message.
func TestBrowserStreamedReplyNeverBeforeItsCause(t *testing.T) {
	s := rap.NewServer("oracle", &rap.ServerOptions{Description: "Answers."})
	rap.AddTool(s, &rap.Tool{Name: "lookup", Description: "Looks the answer up."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			return rap.Text("RESULT-42"), nil
		})
	gate := make(chan struct{}, 2)
	st := newStack(t, stackOptions{
		model: &causeModel{gate: gate, Provider: scripted.New([]scripted.Turn{
			{AfterUser: "look", Text: "Looking it up.", ToolCalls: []scripted.Call{call("lookup", `{}`)}},
			{Text: "Hello.", Repeat: true},
		})},
		tools: []string{toolServer(t, s)},
	})
	id := converse(t, st)
	b := newBrowser(t, 1024, 768)
	b.run("open the thread", chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the thread is live", `document.getElementById('conn').dataset.state === 'live'`)

	// streamingAfter holds when the streaming reply is in sight and the
	// element whose text contains cause comes before it.
	streamingAfter := func(sel, cause string) string {
		return `(() => {
			const s = document.querySelector('.msg.streaming');
			const c = [...document.querySelectorAll(` + jsString(sel) + `)].find((e) => e.textContent.includes(` + jsString(cause) + `));
			return !!s && s.checkVisibility() && !!c && !!(c.compareDocumentPosition(s) & Node.DOCUMENT_POSITION_FOLLOWING);
		})()`
	}
	check := func(what, sel, cause, final string) {
		t.Helper()
		b.wait(what+": the reply streams in sight, under its cause", streamingAfter(sel, cause))
		gate <- struct{}{}
		b.wait(what+": the saved reply", `!document.querySelector('.msg.streaming') && `+contains(".msg.assistant", final))
		order := eval[string](b, `document.getElementById('messages').innerText`)
		if c, a := strings.LastIndex(order, cause), strings.LastIndex(order, replyFirst); c < 0 || c > a {
			t.Errorf("%s: the reply is shown before its cause:\n%s", what, order)
		}
	}

	b.say("look it up")
	check("a tool result", ".msg .result, .msg.tool", "RESULT-42", replyFirst+replySecond)

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := st.RT.PostMessage(ctx, id, "tell me slowly"); err != nil {
		t.Fatal(err)
	}
	check("another client's message", ".msg.user", "tell me slowly", replyFirst+replySecond)

	b.say("go slow")
	check("the page's own message", ".msg.user", "go slow", replyFirst+replySecond)
	// The runtime says the thread is quiet once the turn is over.
	b.wait("the thread is quiet", `document.getElementById('thread-state').dataset.state === 'quiet' && document.getElementById('thread-state').textContent === ''`)
	if n := eval[int](b, `document.querySelectorAll('.msg.assistant').length`); n != 4 {
		t.Errorf("%d assistant messages shown, want 4", n)
	}
}
