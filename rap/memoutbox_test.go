package rap

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The in-memory outbox of a server without a Store is
// bounded per destination. Past the bound a tool result is still queued
// (no worker waits for a runtime; the server refuses the destination's new
// calls, see backlog), while an event waits for room (the subscription
// slows to its runtime's pace) and queues once there is some. Another
// destination is not affected.
func TestMemoryOutboxBounds(t *testing.T) {
	ctx := context.Background()
	o := newMemoryOutbox()
	body := func(typ MessageType) []byte {
		return []byte(fmt.Sprintf(`{"type":%q,"group_id":"g","id":"i","tool_call_id":"i"}`, typ))
	}
	for i := range MaxMemoryQueue - 1 {
		if err := o.Enqueue(ctx, OutboxMessage{Key: fmt.Sprint(i), URL: "http://dead:1/cb", Body: body(TypeToolResult)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, full := o.backlog("http://dead:1/x"); n != MaxMemoryQueue-1 || full {
		t.Fatalf("backlog = %d, %v below the bound", n, full)
	}
	for _, k := range []string{"at", "over"} {
		if err := o.Enqueue(ctx, OutboxMessage{Key: k, URL: "http://dead:1/cb/2", Body: body(TypeToolResult)}); err != nil {
			t.Fatalf("a result of an accepted call was refused: %v", err)
		}
	}
	if n, full := o.backlog("http://dead:1/x"); n != MaxMemoryQueue+1 || !full {
		t.Fatalf("backlog = %d, %v past the bound; want full", n, full)
	}
	if _, full := o.backlog("http://alive:1/cb"); full {
		t.Fatal("another destination is backlogged")
	}
	if dl, _ := o.DeadLetters(ctx, 10); len(dl) != 0 {
		t.Fatalf("dead letters %+v; results are queued, not dropped", dl)
	}

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := o.Enqueue(short, OutboxMessage{Key: "ev0", URL: "http://dead:1/sub", Body: body(TypeSubscriptionEvent)}); err == nil {
		t.Fatal("an event over the bound was queued without room")
	}
	queued := make(chan error, 1)
	go func() {
		queued <- o.Enqueue(ctx, OutboxMessage{Key: "ev1", URL: "http://dead:1/sub", Body: body(TypeSubscriptionEvent)})
	}()
	// The event waits while the destination is full, then takes the
	// room a delivery makes.
	for o.waitingForTest() == 0 {
		select {
		case err := <-queued:
			t.Fatalf("the event did not wait for room: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	for _, k := range []string{"0", "1"} {
		if err := o.Delivered(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-queued:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event was not queued after room was made")
	}
	if p, _ := o.PendingFor(ctx, "http://dead:1", 0, 2*MaxMemoryQueue); len(p) != MaxMemoryQueue || p[len(p)-1].Key != "ev1" {
		t.Errorf("%d queued for the destination, last %q; want %d ending with the event", len(p), p[len(p)-1].Key, MaxMemoryQueue)
	}
}

func (o *memoryOutbox) waitingForTest() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.waiting
}
