package webui_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
)

// summaryTurn answers the runtime's request for a summary of a thread's
// older messages (docs/threads.md, compaction). It comes first in a
// script: no other input asks for a summary.
var summaryTurn = scripted.Turn{When: &scripted.When{UserContains: "Summarize the conversation above"}, Text: "SUMMARY: the person counted from one on.", Repeat: true}

// heldSummary is a model whose first summary waits until release is
// closed, so that a test sees the page while the model writes it.
type heldSummary struct {
	model.Provider
	release chan struct{}
	once    sync.Once
}

func (m *heldSummary) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if n := len(req.Messages); n > 0 && strings.Contains(req.Messages[n-1].Text, "Summarize the conversation above") {
		select {
		case <-m.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return m.Provider.Complete(ctx, req, s)
}

// Release lets the summaries be written.
func (m *heldSummary) Release() { m.once.Do(func() { close(m.release) }) }

// dividerAfter is an expression: the message list shows, right after the
// message of seq (or the last message before it that is shown, which holds
// its result), one divider for the compaction up to seq.
func dividerAfter(seq int64) string {
	return fmt.Sprintf(`(() => { const d = document.querySelectorAll('#messages > li.compaction[data-compaction="%d"]');
	  if (d.length !== 1) return false;
	  const prev = [...document.querySelectorAll('#messages > li[data-seq]')].filter(li => Number(li.dataset.seq) <= %d).pop();
	  return !!prev && prev.nextElementSibling === d[0]; })()`, seq, seq)
}

// Compaction in the page: "Compact" on a thread with too little to
// summarise says why in the status region and draws nothing; after eight
// messages it says that the model is writing, keeps the keyboard focus,
// then draws a divider right after the last message the summary covers,
// folded, that the keyboard opens on the summary; a reload shows it
// again from the history; and a compaction made elsewhere (another
// client, or the runtime near the context window) appears live from the
// compacted event.
func TestBrowserCompaction(t *testing.T) {
	m := &heldSummary{Provider: scripted.New([]scripted.Turn{summaryTurn, {Text: "noted", Repeat: true}}), release: make(chan struct{})}
	t.Cleanup(m.Release)
	st := newStack(t, stackOptions{model: m})
	id := converse(t, st, "one")
	b := newBrowser(t, 1280, 860)
	b.run("open the thread", chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the conversation and the Compact action", `document.querySelectorAll('#messages .msg.assistant').length === 1 && !document.getElementById('compact-thread').hidden`)

	b.allowNetworkErrors.Store(true) // the refusal is answered 400
	b.run("compact with the keyboard", chromedp.Focus(chromedp.CSS("#compact-thread")), chromedp.KeyEvent(kb.Enter))
	b.wait("the refusal", contains("#compact-status", "Not compacted: nothing to compact yet"))
	if got := b.text("#compact-status"); strings.Contains(got, "bad input") || !eval[bool](b, `document.getElementById('compact-status').classList.contains('error')`) {
		t.Errorf("the refusal reads %q; want it shown as an error, in words a person knows", got)
	}
	if n := eval[int](b, `document.querySelectorAll('#messages .compaction').length`); n != 0 {
		t.Errorf("a refused compaction drew %d dividers", n)
	}

	ctx := t.Context()
	for _, text := range []string{"two", "three", "four"} {
		if err := st.RT.PostMessage(ctx, id, text); err != nil {
			t.Fatal(err)
		}
		if err := st.RT.Idle(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	b.wait("eight messages", `document.querySelectorAll('#messages > li[data-seq]').length === 8`)
	b.run("compact again", chromedp.Focus(chromedp.CSS("#compact-thread")), chromedp.KeyEvent(kb.Enter))
	b.wait("the progress", `document.getElementById('compact-status').textContent === 'Compacting… the model is writing a summary' && !document.getElementById('compact-status').classList.contains('error')`)
	if !eval[bool](b, `document.activeElement === document.getElementById('compact-thread') && document.activeElement.getAttribute('aria-disabled') === 'true'`) {
		t.Error("while the model writes, the Compact button lost the focus or does not say it is unavailable")
	}
	m.Release()
	// With six messages always kept whole, eight leave two to summarise.
	b.wait("the divider after the second message", dividerAfter(2))
	b.wait("the outcome", contains("#compact-status", "Compacted 2 earlier messages"))
	if got := b.text("#messages .compaction summary"); got != "Compacted 2 earlier messages — the model sees a summary from here" {
		t.Errorf("the divider reads %q", got)
	}
	if eval[bool](b, `document.querySelector('#messages .compaction details').open || document.querySelector('#messages .compaction .compaction-body').checkVisibility()`) {
		t.Error("the summary is shown unfolded; want it folded under the divider")
	}
	if eval[bool](b, `document.getElementById('compact-thread').hasAttribute('aria-disabled')`) {
		t.Error("after the compaction the Compact button still says it is unavailable")
	}
	b.run("open the summary with the keyboard", chromedp.Focus(chromedp.CSS("#messages .compaction summary")), chromedp.KeyEvent(kb.Enter))
	b.wait("the summary", `document.querySelector('#messages .compaction details').open && document.querySelector('#messages .compaction .compaction-body').checkVisibility()`)
	if got := b.text("#messages .compaction .compaction-body .text"); got != "SUMMARY: the person counted from one on." {
		t.Errorf("the summary reads %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll('#messages > li[data-seq]').length`); n != 8 {
		t.Errorf("after the compaction the page shows %d messages; want all 8 still", n)
	}
	b.screenshot("webui-compaction")

	b.run("reload", chromedp.Reload())
	b.wait("the divider from the history", `document.querySelectorAll('#messages > li[data-seq]').length === 8 && `+dividerAfter(2))
	if got := b.text("#compact-status"); got != "" {
		t.Errorf("after a reload the status region still says %q", got)
	}

	for _, text := range []string{"five", "six", "seven", "eight"} {
		if err := st.RT.PostMessage(ctx, id, text); err != nil {
			t.Fatal(err)
		}
		if err := st.RT.Idle(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	b.wait("sixteen messages", `document.querySelectorAll('#messages > li[data-seq]').length === 16`)
	c, err := st.RT.CompactThread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	b.wait(fmt.Sprintf("the live divider after message %d", c.UpToSeq), dividerAfter(c.UpToSeq)+` && `+dividerAfter(2))
	if got := eval[string](b, fmt.Sprintf(`document.querySelector('#messages .compaction[data-compaction="%d"] summary').textContent`, c.UpToSeq)); got != fmt.Sprintf("Compacted %d earlier messages — the model sees a summary from here", c.Messages) {
		t.Errorf("the live divider reads %q; want it to count the %d messages covered", got, c.Messages)
	}
}
