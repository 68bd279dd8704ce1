package rap

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Bounds of the in-memory outbox of a Server without a Store.
const (
	// MaxMemoryQueue is how many undelivered callbacks a Server without a
	// Store queues per destination (see Destination). Past it, a new
	// invocation whose callback_url is on that destination waits up to
	// MemoryAdmitWait for a callback of that destination to be delivered
	// (or dead-lettered) before it is acknowledged, so that a runtime
	// which takes its callbacks is slowed to the pace it takes them at,
	// never refused; one that has taken none in that time gets 503 with
	// Retry-After (it retries, RAP TR-3). The results of calls already
	// accepted are still queued, so that no worker waits for a runtime,
	// and Emit waits for room (until its ctx ends), so that a
	// subscription slows down to its runtime's pace instead of losing
	// events. Give the server a Store (rap/durable) to ride out long
	// runtime outages.
	MaxMemoryQueue = 1024
	// MemoryAdmitWait is how long a new invocation waits for room in its
	// destination's full in-memory queue (see MaxMemoryQueue) before it
	// is refused with 503.
	MemoryAdmitWait = time.Second
	// maxAdmitWaiters bounds the invocations waiting for room at once,
	// all destinations; past it they are refused at once.
	maxAdmitWaiters = 1024
	// MaxMemoryQueueBytes bounds the bodies of all undelivered callbacks
	// of a Server without a Store; a callback over it is dead-lettered.
	MaxMemoryQueueBytes = 256 << 20
	// MaxMemoryDeadLetters is how many dead letters a Server without a
	// Store keeps; the oldest are forgotten first.
	MaxMemoryDeadLetters = 1000
)

// memoryOutbox is the outbox of a Server without a Store: bounded, lost
// with the process. It lets a handler's result be queued and the worker
// freed at once, so that a runtime that never answers holds no worker.
type memoryOutbox struct {
	mu     sync.Mutex
	seq    int64
	msgs   map[int64]*SequencedMessage
	order  []int64 // Seqs in enqueue order; some may be gone from msgs
	byKey  map[string]int64
	perDst map[string]int
	bytes  int
	dead   []DeadLetter
	room   chan struct{} // closed and replaced when a message leaves while waiting > 0
	// waiting counts Enqueues and admits waiting for room; admitting
	// counts the admits.
	waiting, admitting int
}

var (
	_ DestinationOutbox = (*memoryOutbox)(nil)
	_ DeadLetterStore   = (*memoryOutbox)(nil)
)

func newMemoryOutbox() *memoryOutbox {
	return &memoryOutbox{msgs: map[int64]*SequencedMessage{}, byKey: map[string]int64{}, perDst: map[string]int{}, room: make(chan struct{})}
}

// Enqueue queues m. When its destination's queue or the outbox is full, a
// subscription event waits for room until ctx ends. Anything else is
// queued over the destination's bound (the server refuses new calls for
// it meanwhile), and dead-lettered only when the outbox is full.
func (o *memoryOutbox) Enqueue(ctx context.Context, m OutboxMessage) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, dup := o.byKey[m.Key]; dup {
		return nil
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	// The URL may share memory with the whole invocation it came from:
	// keep only its own bytes while the message waits.
	m.URL = strings.Clone(m.URL)
	dst := Destination(m.URL)
	full := func() bool { return o.bytes+len(m.Body) > MaxMemoryQueueBytes }
	if o.perDst[dst] >= MaxMemoryQueue && peekCallback(m.Body).Type == TypeSubscriptionEvent {
		full = func() bool { return o.perDst[dst] >= MaxMemoryQueue || o.bytes+len(m.Body) > MaxMemoryQueueBytes }
		for full() {
			room := o.room
			o.waiting++
			o.mu.Unlock()
			select {
			case <-room:
			case <-ctx.Done():
				o.mu.Lock()
				o.waiting--
				return fmt.Errorf("rap: callback to %s not queued: the in-memory outbox for this destination stayed full (%d callbacks waiting): %w",
					RedactURL(m.URL), o.perDst[dst], ctx.Err())
			}
			o.mu.Lock()
			o.waiting--
		}
	}
	if full() {
		reason := fmt.Sprintf("the in-memory outbox is full (%d callbacks waiting for this destination, %d bytes in all, limit %d)", o.perDst[dst], o.bytes, MaxMemoryQueueBytes)
		o.addDead(DeadLetter{OutboxMessage: m, DeadAt: time.Now(), Reason: reason})
		return fmt.Errorf("rap: callback to %s dead-lettered: %s; the runtime is not taking callbacks; give the server a Store (rap/durable) to ride out long outages",
			RedactURL(m.URL), reason)
	}
	o.seq++
	o.msgs[o.seq] = &SequencedMessage{OutboxMessage: m, Seq: o.seq}
	o.order = append(o.order, o.seq)
	o.byKey[m.Key] = o.seq
	o.perDst[dst]++
	o.bytes += len(m.Body)
	return nil
}

// backlogFull reports whether dst holds its bound of callbacks or the
// outbox is full. o.mu must be held.
func (o *memoryOutbox) backlogFull(dst string) bool {
	return o.perDst[dst] >= MaxMemoryQueue || o.bytes >= MaxMemoryQueueBytes-MaxCallbackBytes
}

// admit reports whether a new call whose callbacks go to url may be
// accepted: at once when url's destination has room, else as soon as a
// callback leaves the queue within wait (the runtime is taking its
// callbacks, only more slowly than it sends calls), and false when none
// does, ctx ends first, or too many calls wait already. It also returns
// how many callbacks wait for the destination.
func (o *memoryOutbox) admit(ctx context.Context, url string, wait time.Duration) (int, bool) {
	dst := Destination(url)
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.backlogFull(dst) {
		return o.perDst[dst], true
	}
	if o.admitting >= maxAdmitWaiters || wait <= 0 {
		return o.perDst[dst], false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	o.admitting++
	defer func() { o.admitting-- }()
	for o.backlogFull(dst) {
		room := o.room
		o.waiting++
		o.mu.Unlock()
		timedOut := false
		select {
		case <-room:
		case <-t.C:
			timedOut = true
		case <-ctx.Done():
			timedOut = true
		}
		o.mu.Lock()
		o.waiting--
		if timedOut {
			return o.perDst[dst], !o.backlogFull(dst)
		}
	}
	return o.perDst[dst], true
}

// remove takes the message with key out of the queue and returns it.
func (o *memoryOutbox) remove(key string) (*SequencedMessage, bool) {
	seq, ok := o.byKey[key]
	if !ok {
		return nil, false
	}
	m := o.msgs[seq]
	delete(o.msgs, seq)
	delete(o.byKey, key)
	dst := Destination(m.URL)
	if o.perDst[dst]--; o.perDst[dst] <= 0 {
		delete(o.perDst, dst)
	}
	o.bytes -= len(m.Body)
	if o.waiting > 0 {
		close(o.room)
		o.room = make(chan struct{})
	}
	if len(o.order) > 64 && len(o.order) > 2*len(o.msgs) {
		live := o.order[:0]
		for _, s := range o.order {
			if _, ok := o.msgs[s]; ok {
				live = append(live, s)
			}
		}
		o.order = live
	}
	return m, true
}

func (o *memoryOutbox) addDead(d DeadLetter) {
	d.Body = append([]byte(nil), d.Body...)
	if len(o.dead) >= MaxMemoryDeadLetters {
		copy(o.dead, o.dead[1:])
		o.dead = o.dead[:len(o.dead)-1]
	}
	o.dead = append(o.dead, d)
}

// scan returns up to limit queued messages after Seq after that match.
func (o *memoryOutbox) scan(after int64, limit int, match func(*SequencedMessage) bool) []SequencedMessage {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := sort.Search(len(o.order), func(i int) bool { return o.order[i] > after })
	var out []SequencedMessage
	for ; i < len(o.order) && len(out) < limit; i++ {
		if m, ok := o.msgs[o.order[i]]; ok && match(m) {
			out = append(out, *m)
		}
	}
	return out
}

// anyMessage matches every message.
func anyMessage(*SequencedMessage) bool { return true }

func (o *memoryOutbox) Pending(_ context.Context, limit int) ([]OutboxMessage, error) {
	msgs := o.scan(0, limit, anyMessage)
	out := make([]OutboxMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m.OutboxMessage
	}
	return out, nil
}

func (o *memoryOutbox) PendingAfter(_ context.Context, after int64, limit int) ([]SequencedMessage, error) {
	return o.scan(after, limit, anyMessage), nil
}

func (o *memoryOutbox) PendingFor(_ context.Context, dest string, after int64, limit int) ([]SequencedMessage, error) {
	return o.scan(after, limit, func(m *SequencedMessage) bool { return Destination(m.URL) == dest }), nil
}

func (o *memoryOutbox) Attempted(_ context.Context, key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if seq, ok := o.byKey[key]; ok {
		o.msgs[seq].Attempts++
	}
	return nil
}

func (o *memoryOutbox) Delivered(_ context.Context, key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.remove(key)
	return nil
}

func (o *memoryOutbox) DeadLetter(_ context.Context, key string, status int, reason string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m, ok := o.remove(key); ok {
		o.addDead(DeadLetter{OutboxMessage: m.OutboxMessage, DeadAt: time.Now(), Status: status, Reason: reason})
	}
	return nil
}

func (o *memoryOutbox) DeadLetters(_ context.Context, limit int) ([]DeadLetter, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := min(max(limit, 0), len(o.dead))
	return append([]DeadLetter(nil), o.dead[:n]...), nil
}

func (o *memoryOutbox) takeDead(key string) (DeadLetter, error) {
	for i, d := range o.dead {
		if d.Key == key {
			o.dead = append(o.dead[:i], o.dead[i+1:]...)
			return d, nil
		}
	}
	return DeadLetter{}, fmt.Errorf("rap: dead letter %q: %w", key, ErrNoDeadLetter)
}

func (o *memoryOutbox) RetryDeadLetter(ctx context.Context, key string) error {
	o.mu.Lock()
	d, err := o.takeDead(key)
	o.mu.Unlock()
	if err != nil {
		return err
	}
	m := d.OutboxMessage
	m.Attempts, m.Created = 0, time.Now()
	return o.Enqueue(ctx, m)
}

func (o *memoryOutbox) DropDeadLetter(_ context.Context, key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.takeDead(key)
	return err
}

// PendingResult implements ResultLookup: whether a tool result for the
// call (groupID, id) waits in the outbox. It reads every queued message,
// which is fine for a question a runtime asks rarely.
func (o *memoryOutbox) PendingResult(_ context.Context, groupID, id string) (bool, error) {
	msgs := o.scan(0, 1, func(m *SequencedMessage) bool {
		return bytes.Contains(m.Body, []byte(id)) && isResultFor(m.Body, groupID, id)
	})
	return len(msgs) > 0, nil
}

// isResultFor reports whether body is a tool_result of the call (groupID,
// id).
func isResultFor(body []byte, groupID, id string) bool {
	var head struct {
		Type    MessageType `json:"type"`
		GroupID string      `json:"group_id"`
		ID      string      `json:"id"`
	}
	return json.Unmarshal(body, &head) == nil && head.Type == TypeToolResult && head.GroupID == groupID && head.ID == id
}
