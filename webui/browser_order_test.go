package webui_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
)

// While a subscription delivers 50 events into the thread, the page shows
// the conversation in the order of the history, each message and each
// event once (RAP SU-5, SU-6).
func TestBrowserFiftyEventsInHistoryOrder(t *testing.T) {
	const events = 50
	s := rap.NewServer("ticks", &rap.ServerOptions{Description: "Ticks."})
	rap.AddSubscription(s, &rap.Tool{Name: "ticker", Description: "Sends ticks into the thread."},
		func(ctx context.Context, sub *rap.Subscription, _ struct{}) error {
			for i := 1; i < events; i++ {
				if err := sub.EmitAssociative(ctx, fmt.Sprintf(`{"tick":%d}`, i)); err != nil {
					return err
				}
			}
			return sub.Final(ctx, fmt.Sprintf(`{"tick":%d}`, events), true)
		})
	st := newStack(t, stackOptions{
		model: scripted.New([]scripted.Turn{
			{AfterUser: "ticks", Text: "Counting ticks.", ToolCalls: []scripted.Call{call("ticker", `{}`)}},
			{When: &scripted.When{LastInput: "tool_result"}, Text: "Noted {{last_result}}.", Repeat: true},
		}),
		tools: []string{toolServer(t, s)},
	})
	id := converse(t, st)
	b := newBrowser(t, 1024, 768)
	b.run("open the thread", chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the thread is live", `document.getElementById('conn').dataset.state === 'live'`)
	b.say("count the ticks")

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	b.wait("every event", fmt.Sprintf(`[...document.querySelectorAll('#messages .call')].filter(c => c.querySelector('.tool-name').textContent === 'event' && !c.querySelector('.result.pending')).length === %d`, events))
	if err := st.RT.Idle(ctx, id); err != nil {
		t.Fatal(err)
	}
	history, err := st.RT.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// What the page must show, in order: the user and assistant messages
	// by seq, and the events' texts.
	var seqs []int
	var ticks []string
	injected := map[string]bool{}
	for _, m := range history {
		if m.Role != "tool" {
			seqs = append(seqs, int(m.Seq))
		}
		for _, c := range m.ToolCalls {
			if c.Name == "receive_event__injected" {
				injected[c.ID] = true
			}
		}
		for _, r := range m.ToolResults {
			if injected[r.CallID] {
				ticks = append(ticks, r.Text)
			}
		}
	}
	if len(ticks) != events {
		t.Fatalf("the history has %d events, want %d", len(ticks), events)
	}
	b.wait("every message", fmt.Sprintf(`document.querySelectorAll('#messages > li[data-seq]').length === %d && !document.querySelector('.msg.streaming')`, len(seqs)))
	shownSeqs := eval[[]int](b, `[...document.querySelectorAll('#messages > li[data-seq]')].map(li => Number(li.dataset.seq))`)
	if !slices.Equal(shownSeqs, seqs) {
		t.Errorf("the page shows the messages in the order %v, the history is %v", shownSeqs, seqs)
	}
	shownTicks := eval[[]string](b, `[...document.querySelectorAll('#messages .call')].filter(c => c.querySelector('.tool-name').textContent === 'event').map(c => c.querySelector('.result .text').textContent)`)
	if !slices.Equal(shownTicks, ticks) {
		t.Errorf("the page shows the events in the order\n%v\nthe history has\n%v", shownTicks, ticks)
	}
}
