package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// summarising answers the runtime's request for a summary with a
// recognisable text, and every other request with "ok".
var summarising = []scripted.Turn{
	{When: &scripted.When{UserContains: "Summarize the conversation above"}, Text: "SUMMARY: the user counted.", Repeat: true},
	{Text: "ok", Repeat: true},
}

// CompactThread refuses a thread with too little to summarise
// (ErrBadRequest, saying so), compacts one with enough, and sends the
// compacted event; HistoryWithCompactions then returns every message
// together with that compaction, and an unknown thread is ErrNotFound.
func TestCompactThreadAndHistoryWithCompactions(t *testing.T) {
	rt := startRuntime(scripted.New(summarising), "")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _ := client.New(rt.URL)
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CompactThread(ctx, th.ID)
	var apiErr *client.Error
	if !errors.Is(err, client.ErrBadRequest) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "nothing to compact yet") {
		t.Fatalf("compacting an empty thread: %v; want ErrBadRequest saying there is nothing to compact yet", err)
	}
	s, err := c.Events(ctx, th.ID, client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for next(t, s).Type != api.EventReplayDone {
	}
	const sent = 5
	for i := range sent {
		if _, err := c.PostMessage(ctx, th.ID, fmt.Sprintf("number %d", i)); err != nil {
			t.Fatal(err)
		}
		waitReplies(ctx, t, c, th.ID, i+1)
	}
	comp, err := c.CompactThread(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if comp.Summary != "SUMMARY: the user counted." || comp.Messages < 1 || comp.UpToSeq < 1 || comp.Created.IsZero() {
		t.Errorf("compaction = %+v; want the model's summary of at least one message", comp)
	}
	for {
		ev := next(t, s)
		if ev.Type != api.EventCompacted {
			continue
		}
		got, ok := ev.Payload.(*api.Compaction)
		if !ok || got.UpToSeq != comp.UpToSeq || got.Summary != comp.Summary {
			t.Errorf("compacted event = %#v; want the answer's compaction %+v", ev.Payload, comp)
		}
		break
	}
	h, err := c.HistoryWithCompactions(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 2*sent {
		t.Errorf("history has %d messages; want all %d, the compacted ones too", len(h.Messages), 2*sent)
	}
	if len(h.Compactions) != 1 || h.Compactions[0].UpToSeq != comp.UpToSeq || h.Compactions[0].Messages != comp.Messages || h.Compactions[0].Summary != comp.Summary {
		t.Errorf("history's compactions = %+v; want the one made, %+v", h.Compactions, comp)
	}
	if _, err := c.HistoryWithCompactions(ctx, "no-such-thread"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("history of an unknown thread: %v; want ErrNotFound", err)
	}
	if _, err := c.CompactThread(ctx, "no-such-thread"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("compacting an unknown thread: %v; want ErrNotFound", err)
	}
}

// waitReplies waits until the thread has n assistant messages.
func waitReplies(ctx context.Context, t *testing.T, c *client.Client, threadID string, n int) {
	t.Helper()
	for {
		msgs, err := c.History(ctx, threadID)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, m := range msgs {
			if m.Role == "assistant" {
				got++
			}
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the thread has %d replies; want %d", got, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
