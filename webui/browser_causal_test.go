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

// The runtime saves a turn's inputs with its reply, after the
// reply streamed, so a client printing streamed text as it arrives shows
// the reply before its cause. The page streams a reply only when it shows
// what caused it (its own message, not yet saved); while a tool result or
// another client's message is on its way, the streamed text is kept out
// of sight, and the reply appears after its cause when saved.
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

	// A tool result causes the reply: while the reply streams, the result
	// is not saved (nor announced) yet.
	b.say("look it up")
	b.wait("the reply to the result is streaming", contains(".msg.streaming", replyFirst))
	if eval[bool](b, `document.querySelector('.msg.streaming').checkVisibility() && !!document.querySelector('.call .result.pending')`) {
		t.Errorf("the page shows the reply streaming while the tool result that caused it is still pending:\n%s", eval[string](b, `document.getElementById('messages').innerText`))
	}
	gate <- struct{}{}
	b.wait("the saved reply", contains(".msg.assistant:not(.streaming)", replyFirst+replySecond))
	order := eval[string](b, `document.getElementById('messages').innerText`)
	if r, a := strings.Index(order, "RESULT-42"), strings.Index(order, replyFirst); r < 0 || r > a {
		t.Errorf("the reply is shown before the result that caused it:\n%s", order)
	}

	// Another client's message causes the reply: the page learns of the
	// message only when it is saved, with the reply.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := st.RT.PostMessage(ctx, id, "tell me slowly"); err != nil {
		t.Fatal(err)
	}
	b.wait("the reply to the other client's message is streaming", contains(".msg.streaming", replyFirst))
	if eval[bool](b, `document.querySelector('.msg.streaming').checkVisibility() && !`+contains(".msg.user", "tell me slowly")) {
		t.Errorf("the page shows the reply streaming before the message that caused it:\n%s", eval[string](b, `document.getElementById('messages').innerText`))
	}
	gate <- struct{}{}
	b.wait("the message and its reply", contains(".msg.user", "tell me slowly")+` && !document.querySelector('.msg.streaming')`)
	order = eval[string](b, `document.getElementById('messages').innerText`)
	if u, a := strings.Index(order, "tell me slowly"), strings.LastIndex(order, replyFirst); u < 0 || u > a {
		t.Errorf("the reply is shown before the message that caused it:\n%s", order)
	}

	// The page's own message is shown at once (queued): its reply streams
	// live, under it.
	b.say("go slow")
	b.wait("the reply to the page's own message is streaming", contains(".msg.streaming", replyFirst))
	b.wait("the reply streams in sight, under the message", `document.querySelector('.msg.streaming').checkVisibility() && !!document.querySelector('.msg.queued')`)
	gate <- struct{}{}
	b.wait("the third reply", `!document.querySelector('.msg.streaming') && document.querySelectorAll('.msg.assistant').length === 4`)
}
