package termchat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
)

// childTickTools serves "clock", a subscription whose n events each
// start a child thread (not associative), gap apart, then ends.
func childTickTools(t *testing.T, n int, gap time.Duration) string {
	t.Helper()
	srv := rap.NewServer("clock", &rap.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rap.AddSubscription(srv, &rap.Tool{Name: "clock", Description: "clock"}, func(ctx context.Context, sub *rap.Subscription, in struct{}) error {
		for i := 1; i <= n; i++ {
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				return nil
			}
			text := fmt.Sprintf("tick %d", i)
			if i == n {
				return sub.Final(ctx, text, false)
			}
			if err := sub.Emit(ctx, text); err != nil {
				return err
			}
		}
		return nil
	})
	return serveToolServer(t, srv).URL
}

// The README tour's "watch the clock tick": each tick starts
// a child thread that closes with a report to the root. A piped chat
// ended, about once in six runs, right after the last child closed: the
// quiet check read the root (nothing queued yet) before the child
// (closed, its report just queued at the root). The chat must show every
// child's close, every report and the root's answer to the last one.
func TestChatPipedWaitsForTheLastChildsReport(t *testing.T) {
	const n = 3
	m := scripted.New([]scripted.Turn{
		{AfterUser: "was started to handle the subscription event", Repeat: true,
			ToolCalls: []scripted.Call{{Name: "close_thread", Arguments: json.RawMessage(`{"thread_id": "{{thread_id}}", "report_to_parent": "the clock ticked"}`)}}},
		{AfterUser: "tick", ToolCalls: []scripted.Call{{Name: "clock", Arguments: json.RawMessage(`{}`)}}},
		{When: &scripted.When{LastResultContains: "Subscribed", LastInput: "tool_result"}, Text: "Watching."},
		{When: &scripted.When{LastResultContains: "the clock ticked", LastInput: "tool_result"}, Text: "A child reports a tick.", Repeat: true},
		{Text: "ok", Repeat: true},
	})
	rt := startTestRuntime(t, m, childTickTools(t, n, 50*time.Millisecond))
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "watch the clock tick\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	// Reports that arrive together are answered in one turn: count the
	// closes and the reports, and want an answer after the last report.
	for _, w := range []string{" closed\n", "→ report from thread "} {
		if got := strings.Count(out, w); got != n {
			t.Errorf("%q shown %d times, want %d; output:\n%s", w, got, n, out)
		}
	}
	last := strings.LastIndex(out, "→ report from thread ")
	if last < 0 || !strings.Contains(out[last:], "assistant: A child reports a tick.") {
		t.Errorf("the root's answer to the last report is not shown; output:\n%s", out)
	}
	threads, _ := rt.Threads(context.Background())
	for _, th := range threads {
		if th.ParentID != "" {
			continue
		}
		msgs, _ := rt.History(context.Background(), th.ID)
		if last := msgs[len(msgs)-1]; !strings.Contains(last.Text, "A child reports a tick.") {
			t.Errorf("the chat ended before the root's last turn; last message %+v", last)
		}
	}
}
