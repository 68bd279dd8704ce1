package rap

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The in-memory outbox of a server without a Store is
// bounded per destination. Past the bound a tool result is still queued
// (no worker waits for a runtime; the server holds back the destination's new
// calls, see admit), while an event waits for room (the subscription
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
	if n, ok := o.admit(ctx, "http://dead:1/x", 0); n != MaxMemoryQueue-1 || !ok {
		t.Fatalf("admit = %d, %v below the bound", n, ok)
	}
	for _, k := range []string{"at", "over"} {
		if err := o.Enqueue(ctx, OutboxMessage{Key: k, URL: "http://dead:1/cb/2", Body: body(TypeToolResult)}); err != nil {
			t.Fatalf("a result of an accepted call was refused: %v", err)
		}
	}
	if n, ok := o.admit(ctx, "http://dead:1/x", 0); n != MaxMemoryQueue+1 || ok {
		t.Fatalf("admit = %d, %v past the bound; want refused", n, ok)
	}
	if _, ok := o.admit(ctx, "http://alive:1/cb", 0); !ok {
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

// A new call for a destination whose in-memory queue is full waits for
// room rather than being refused: it is admitted as soon as one of the
// destination's callbacks leaves the queue (the runtime takes its
// callbacks, only more slowly than it sends calls), and refused when none
// leaves within the wait.
func TestMemoryOutboxAdmitWaitsForRoom(t *testing.T) {
	ctx := context.Background()
	o := newMemoryOutbox()
	body := []byte(`{"type":"tool_result","group_id":"g","id":"i"}`)
	for i := range MaxMemoryQueue {
		if err := o.Enqueue(ctx, OutboxMessage{Key: fmt.Sprint(i), URL: "http://slow:1/cb", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if n, ok := o.admit(ctx, "http://slow:1/cb", time.Millisecond); ok || n != MaxMemoryQueue {
		t.Fatalf("admit with nothing delivered = %d, %v; want %d, refused", n, ok, MaxMemoryQueue)
	}
	admitted := make(chan bool, 1)
	go func() {
		_, ok := o.admit(ctx, "http://slow:1/cb", time.Hour)
		admitted <- ok
	}()
	for o.waitingForTest() == 0 {
		select {
		case ok := <-admitted:
			t.Fatalf("admit returned %v without waiting for room", ok)
		case <-time.After(time.Millisecond):
		}
	}
	if err := o.Delivered(ctx, "0"); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-admitted:
		if !ok {
			t.Fatal("the call was refused although a callback was delivered while it waited")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not admitted after a callback was delivered")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := o.Enqueue(ctx, OutboxMessage{Key: "refill", URL: "http://slow:1/cb", Body: body}); err != nil {
		t.Fatal(err)
	}
	if _, ok := o.admit(cancelled, "http://slow:1/cb", time.Hour); ok {
		t.Fatal("a call whose request ended was admitted to a full queue")
	}
}
