package webui_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/termchat"
)

// lockedBuffer collects the terminal client's output; the test reads it
// while the chat writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// terminalItems is the conversation a piped "rap chat" printed, one item
// per user message, reply, tool call, result and subscription event, in
// the order printed.
func terminalItems(out string) []string {
	var items []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "you: "):
			items = append(items, "user: "+strings.TrimPrefix(line, "you: "))
		case strings.HasPrefix(line, "assistant: "):
			items = append(items, line)
		case strings.HasPrefix(line, "  → "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  → "), "(")
			if !strings.HasPrefix(name, "event from ") { // an event: its result line shows it
				items = append(items, "call: "+name)
			}
		case strings.HasPrefix(line, "  ← event: "):
			items = append(items, "event: "+strings.TrimPrefix(line, "  ← event: "))
		case strings.HasPrefix(line, "  ← "):
			_, text, _ := strings.Cut(strings.TrimPrefix(line, "  ← "), ": ")
			items = append(items, "result: "+text)
		}
	}
	return items
}

// pageItems is the same extraction from the web UI's message list: a
// call's result is shown in the call's block, right after it.
const pageItems = `(() => {
  const out = [];
  for (const li of document.querySelectorAll('#messages > li')) {
    if (li.classList.contains('user')) out.push('user: ' + li.querySelector(':scope > .text').textContent);
    if (!li.classList.contains('assistant')) continue;
    const text = li.querySelector(':scope > .text');
    if (text) out.push('assistant: ' + text.textContent);
    for (const c of li.querySelectorAll('.call')) {
      const name = c.querySelector('.tool-name').textContent;
      const result = [...c.querySelectorAll('.result > .text')].map((e) => e.textContent).join('\n');
      if (name === 'event') {
        out.push('event: ' + result);
      } else {
        out.push('call: ' + name);
        out.push('result: ' + result);
      }
    }
  }
  return out;
})()`

// "rap chat" and the web UI, connected to the same
// thread at once, show the same conversation in the same order while a
// subscription delivers 50 events into it (RAP SU-5, SU-6): every user
// message, reply, tool call, result and event once, in the same order.
func TestBrowserAndTerminalChatShowTheSameConversation(t *testing.T) {
	const events = 50
	s := rap.NewServer("ticks", &rap.ServerOptions{Description: "Ticks."})
	rap.AddSubscription(s, &rap.Tool{Name: "ticker", Description: "Sends ticks into the thread."},
		func(ctx context.Context, sub *rap.Subscription, _ struct{}) error {
			for i := 1; i <= events; i++ {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
				text := fmt.Sprintf("tick %d", i)
				if i == events {
					return sub.Final(ctx, text, true)
				}
				if err := sub.EmitAssociative(ctx, text); err != nil {
					return err
				}
			}
			return nil
		})
	st := newStack(t, stackOptions{
		model: scripted.New([]scripted.Turn{
			{AfterUser: "ticks", Text: "Counting ticks.", ToolCalls: []scripted.Call{call("ticker", `{}`)}},
			{When: &scripted.When{LastResultContains: "tick", LastInput: "tool_result"}, Text: "Noted {{last_result}}.", Repeat: true},
			{When: &scripted.When{LastInput: "tool_result"}, Text: "Watching.", Repeat: true},
		}),
		tools: []string{toolServer(t, s)},
	})
	id := converse(t, st)
	b := newBrowser(t, 1024, 768)
	b.run("open the thread", chromedp.Navigate(st.URL+"/#/t/"+id))
	b.wait("the thread is live", `document.getElementById('conn').dataset.state === 'live'`)

	// The terminal client sends the message and stays until the thread is
	// quiet: the subscription ended and every event was answered.
	var out, errOut lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitFor)
	defer cancel()
	err := termchat.Run(ctx, termchat.Options{Server: st.URL, Thread: id, Wait: 2 * waitFor,
		In: strings.NewReader("count the ticks\n"), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatalf("rap chat: %v\nstderr:\n%s\nstdout:\n%s", err, errOut.String(), out.String())
	}
	if err := st.RT.Idle(ctx, id); err != nil {
		t.Fatal(err)
	}
	term := terminalItems(out.String())
	if n := len(slices.DeleteFunc(slices.Clone(term), func(s string) bool { return !strings.HasPrefix(s, "event: ") })); n != events {
		t.Fatalf("rap chat shows %d events, want %d:\n%s", n, events, out.String())
	}
	// The page is connected to the same stream: poll until it settled.
	var page []string
	for deadline := time.Now().Add(waitFor); ; {
		busy := eval[bool](b, `!!document.querySelector('.msg.streaming, .msg.queued, .result.pending')`)
		page = eval[[]string](b, pageItems)
		if !busy && len(page) >= len(term) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Equal(page, term) {
		t.Errorf("the web UI and rap chat show different conversations\nweb UI:\n  %s\nrap chat:\n  %s\nrap chat's output:\n%s",
			strings.Join(page, "\n  "), strings.Join(term, "\n  "), out.String())
	}
	seen := map[string]bool{}
	for _, it := range term {
		if strings.HasPrefix(it, "event: ") {
			if seen[it] {
				t.Errorf("%q is shown twice", it)
			}
			seen[it] = true
		}
	}
}
