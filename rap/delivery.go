package rap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Bounds of the memory an outbox loop holds. The loop
// holds at most destinationHold messages of one destination; the rest of a
// destination's backlog waits in the outbox and is read as it drains, so a
// dead runtime's backlog never takes the room of a healthy one.
const (
	outboxBatch          = 256      // messages read from the outbox per query
	outboxWindow         = 16384    // messages held, all destinations
	outboxWindowBytes    = 64 << 20 // bodies held, all destinations
	destinationHold      = 256      // messages held per destination
	destinationHoldBytes = 16 << 20 // bodies held per destination
	catchUpScans         = 16       // PendingFor queries per destination per refill
)

// callLane is the queue of messages of one call to one callback URL (see
// laneKey). One goroutine drains a lane at a time, so its messages go out
// in enqueue order; different lanes are drained concurrently, within their
// destination's bound on POSTs at once.
type callLane struct {
	key    string
	msgs   []OutboxMessage
	active bool
}

// destination is the delivery state of one Destination: its lanes, the
// memory they hold and its own bound on concurrent POSTs.
type destination struct {
	key   string
	sem   chan struct{}        // MaxInFlight: POSTs to this destination at once
	lanes map[string]*callLane // by laneKey
	held  int                  // messages in lanes
	bytes int                  // their bodies

	// behind is set when the main read skipped messages of this
	// destination because it held its share; cursor is the Seq up to
	// which its own reads (PendingFor) have caught up.
	behind bool
	cursor int64
}

func (d *destination) full() bool {
	return d.held >= destinationHold || (d.held > 0 && d.bytes >= destinationHoldBytes)
}

// outboxLoop is the state of one Run.
type outboxLoop struct {
	s     *Sender
	mu    sync.Mutex // guards everything below; held across outbox reads
	dests map[string]*destination
	known map[string]bool // keys held in lanes, including the ones in flight
	held  int
	bytes int
	// lastSeq is the largest Seq read from a SequencedOutbox by the main
	// read.
	lastSeq int64
	// starts lists the lanes hold made active since the last refill,
	// whose goroutines refill starts.
	starts []laneStart
	wg     sync.WaitGroup
	done   chan struct{} // a lane finished a message: room to refill
}

// laneStart is a lane waiting for its goroutine.
type laneStart struct {
	d  *destination
	ln *callLane
}

func (l *outboxLoop) full() bool {
	return l.held >= outboxWindow || (l.held > 0 && l.bytes >= outboxWindowBytes)
}

// Run delivers the outbox's messages until ctx ends, then returns
// ctx.Err() once every delivery goroutine has stopped. It first delivers
// whatever a previous process left pending, then every message Send
// enqueues.
//
// Messages are delivered per destination (see Destination): each has its
// own queue in memory, bounded in messages and bytes, and at most
// SenderOptions.PerDestination POSTs at once (MaxInFlight by default) over
// kept-alive connections, so a runtime that is slow or never answers
// delays only the callbacks addressed to it. Within a destination, messages
// are ordered per call and callback URL (see laneKey): a call's oauth or
// user_choice messages, its view updates, its result and, for a
// subscription, its events go out in the order they were sent (so a
// subscription's events never overtake one another or its final event),
// while different calls' messages are delivered concurrently, even when
// every call names the same callback URL.
//
// Connection errors, timeouts and 5xx answers are retried per message with
// full-jitter exponential backoff (RAP TR-6); the message stays in the
// outbox meanwhile and later messages of its lane wait behind it, but
// other lanes' messages do not: a callback that keeps failing delays only
// its own lane (it takes one of the destination's POSTs only while an
// attempt is under way, never while it waits to retry). The memory a
// destination holds (256 messages) is shared by its lanes, though: a
// single lane with more callbacks than that waiting behind its failing
// one fills it, and the destination's other lanes then wait until its
// messages are delivered or dead-lettered. A
// message still undelivered after RetryPolicy.GiveUpAfter, or refused with
// a 4xx answer (never retried, RAP TR-6), is dead-lettered: logged once
// and, when the Outbox is a DeadLetterStore, kept there for an operator.
// Two refusals are handled instead: a tool result refused with 413 is
// replaced, once, by a short "Error: " result saying it was too large;
// a subscription event refused with 410 Gone is dropped, since the
// runtime has ended that subscription.
//
// Without an Outbox, Run has nothing to do and just waits for ctx. Only one
// Run may be active per Sender; a second returns an error at once. Run one
// delivery loop per outbox: two processes running Run on the same file
// would both deliver its messages, duplicating them (harmless to a runtime
// that deduplicates, RAP RE-6, but wasteful). Other processes may Send
// into it freely; Run picks their messages up within a second.
func (s *Sender) Run(ctx context.Context) error {
	if s.outbox == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("rap: Sender.Run is already running; call it once per Sender")
	}
	defer s.running.Store(false)

	l := &outboxLoop{
		s:     s,
		dests: make(map[string]*destination),
		known: make(map[string]bool),
		done:  make(chan struct{}, 1),
	}
	defer s.queued.Store(0) // what this Run held is read again by the next
	defer l.wg.Wait()

	poll := time.NewTicker(outboxPoll)
	defer poll.Stop()
	for {
		if err := l.refill(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.log.Error("rap: reading the outbox failed; retrying", "error", err, "retry_in", outboxRetryWait)
			if sleepCtx(ctx, outboxRetryWait) != nil {
				return ctx.Err()
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		case <-l.done:
		case <-poll.C:
		}
	}
}

// refill reads pending messages the loop does not hold yet, appends them
// to their lanes in enqueue order, and starts a goroutine for every idle
// lane with work.
//
// The lock is held across the reads so that a lane cannot finish a message
// (delete it from the outbox, then forget its key) between a read and the
// merge, which would otherwise bring the just-delivered message back.
func (l *outboxLoop) refill(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if so, ok := l.s.outbox.(SequencedOutbox); ok {
		if err := l.readNew(ctx, so); err != nil {
			return err
		}
		if err := l.catchUp(ctx, so); err != nil {
			return err
		}
	} else if err := l.readPlain(ctx); err != nil {
		return err
	}
	for key, d := range l.dests {
		if len(d.lanes) == 0 && !d.behind {
			delete(l.dests, key) // nothing held and nothing skipped
		}
	}
	for i, st := range l.starts {
		l.wg.Add(1)
		go l.drain(ctx, st.d, st.ln)
		l.starts[i] = laneStart{}
	}
	l.starts = l.starts[:0]
	return nil
}

// readNew reads the messages enqueued after lastSeq. A message of a
// destination that holds its share is skipped, and the destination marked
// behind: catchUp reads it later.
func (l *outboxLoop) readNew(ctx context.Context, so SequencedOutbox) error {
	for !l.full() {
		msgs, err := so.PendingAfter(ctx, l.lastSeq, outboxBatch)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if l.full() {
				return nil // lastSeq stays before m: read again later
			}
			l.lastSeq = m.Seq
			d := l.dest(m.URL)
			switch {
			case d.behind:
				// catchUp reads it, after the ones skipped before.
			case d.full():
				d.behind, d.cursor = true, m.Seq-1
			default:
				l.hold(d, m.OutboxMessage)
			}
		}
		if len(msgs) < outboxBatch {
			return nil
		}
	}
	return nil
}

// catchUp reads, for every destination that is behind and has drained to
// half its share, its skipped messages in Seq order.
func (l *outboxLoop) catchUp(ctx context.Context, so SequencedOutbox) error {
	do, _ := so.(DestinationOutbox)
	for _, d := range l.dests {
		if !d.behind || d.held > destinationHold/2 {
			continue
		}
		for n := 0; n < catchUpScans && d.behind && !d.full() && !l.full(); n++ {
			var msgs []SequencedMessage
			var err error
			if do != nil {
				msgs, err = do.PendingFor(ctx, d.key, d.cursor, outboxBatch)
			} else {
				msgs, err = so.PendingAfter(ctx, d.cursor, outboxBatch)
			}
			if err != nil {
				return err
			}
			if l.catchUpWith(d, msgs) && len(msgs) < outboxBatch {
				d.behind = false // read up to the end of the outbox
			}
		}
	}
	return nil
}

// catchUpWith holds the messages of d among msgs, in order, until d or the
// loop is full. It reports whether it went through all of msgs.
func (l *outboxLoop) catchUpWith(d *destination, msgs []SequencedMessage) bool {
	for _, m := range msgs {
		if m.Seq > l.lastSeq {
			// The main read has not reached it: it reads the rest.
			d.behind = false
			return false
		}
		if Destination(m.URL) != d.key {
			d.cursor = m.Seq
			continue
		}
		if d.full() || l.full() {
			return false
		}
		d.cursor = m.Seq
		l.hold(d, m.OutboxMessage)
	}
	return true
}

// readPlain refills from an Outbox that only has Pending: it re-reads the
// oldest messages and holds those it does not hold yet, skipping the
// destinations that hold their share.
func (l *outboxLoop) readPlain(ctx context.Context) error {
	if l.full() {
		return nil
	}
	msgs, err := l.s.outbox.Pending(ctx, min(l.held+4*outboxBatch, outboxWindow))
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if l.full() {
			break
		}
		if l.known[m.Key] {
			continue
		}
		// Once full, a destination stays full for the rest of this
		// read, so no later message of a lane is held before an
		// earlier one.
		if d := l.dest(m.URL); !d.full() {
			l.hold(d, m)
		}
	}
	return nil
}

// dest returns the state of url's destination, creating it if needed.
func (l *outboxLoop) dest(url string) *destination {
	key := Destination(url)
	d := l.dests[key]
	if d == nil {
		d = &destination{key: key, sem: make(chan struct{}, l.s.perDest), lanes: make(map[string]*callLane)}
		l.dests[key] = d
	}
	return d
}

// hold appends m to its call's lane unless the loop holds it already, and
// marks an idle lane for refill to start. l.mu must be held.
func (l *outboxLoop) hold(d *destination, m OutboxMessage) {
	if l.known[m.Key] {
		return
	}
	l.known[m.Key] = true
	key := laneKey(m)
	ln := d.lanes[key]
	if ln == nil {
		ln = &callLane{key: key}
		d.lanes[key] = ln
	}
	if !ln.active {
		ln.active = true
		l.starts = append(l.starts, laneStart{d, ln})
	}
	ln.msgs = append(ln.msgs, m)
	d.held++
	d.bytes += len(m.Body)
	l.held++
	l.bytes += len(m.Body)
	l.s.queued.Add(1)
}

// drain delivers a lane's messages in order until the lane is empty or ctx
// ends.
func (l *outboxLoop) drain(ctx context.Context, d *destination, ln *callLane) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if len(ln.msgs) == 0 || ctx.Err() != nil {
			ln.active = false
			if len(ln.msgs) == 0 {
				delete(d.lanes, ln.key)
				if len(d.lanes) == 0 && !d.behind && l.dests[d.key] == d {
					delete(l.dests, d.key)
				}
			}
			l.mu.Unlock()
			return
		}
		m := ln.msgs[0]
		l.mu.Unlock()

		if !l.deliver(ctx, d, m) {
			// ctx ended: the message stays in the outbox for the next Run.
			l.mu.Lock()
			ln.active = false
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		ln.msgs[0] = OutboxMessage{} // let the body be collected
		ln.msgs = ln.msgs[1:]
		delete(l.known, m.Key)
		d.held--
		d.bytes -= len(m.Body)
		l.held--
		l.bytes -= len(m.Body)
		l.s.queued.Add(-1)
		l.mu.Unlock()
		l.s.signal()
		select {
		case l.done <- struct{}{}:
		default:
		}
	}
}

// deliver POSTs m until it is delivered, dropped or dead-lettered (true),
// or ctx ends (false).
func (l *outboxLoop) deliver(ctx context.Context, d *destination, m OutboxMessage) bool {
	s := l.s
	key, body := m.Key, m.Body
	replaced := false
	var last *DeliveryError
	for n := 1; ; n++ {
		select {
		case d.sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		r := s.attempt(withTrace(ctx, traceContext{m.TraceParent, m.TraceState}), m.URL, key, body, m.Attempts+n)
		<-d.sem
		if r.ok() {
			s.countDelivery(deliveryDelivered)
			return l.finish(ctx, m)
		}
		last = r.err
		if last.Permanent {
			switch {
			case last.Status == http.StatusRequestEntityTooLarge && !replaced:
				if small, ok := tooLargeReplacement(body); ok {
					// The call still gets a result.
					s.log.Error("rap: the runtime refused a tool result as too large (HTTP 413); sending an error result instead",
						"url", redactedURL(m.URL), "key", m.Key, "bytes", len(body))
					key, body, replaced = m.Key+"-too-large", small, true
					s.countDelivery(deliveryReplaced)
					continue
				}
			case last.Status == http.StatusGone:
				if h := peekCallback(body); h.Type == TypeSubscriptionEvent {
					// The runtime has ended the
					// subscription; stop it here too.
					s.log.Info("rap: the runtime no longer knows the subscription (HTTP 410); dropping its event and stopping it",
						"url", redactedURL(m.URL), "key", m.Key, "group_id", h.GroupID, "tool_call_id", h.ToolCallID)
					if s.onGone != nil {
						s.onGone(h.GroupID, h.ToolCallID)
					}
					s.countDelivery(deliveryGone)
					return l.finish(ctx, m)
				}
			}
			return l.deadLetter(ctx, m, last.Status, refusalReason(last))
		}
		if ctx.Err() != nil {
			return false
		}
		// Every message gets at least one attempt, however old (the tool
		// server may have been down); after that, retries end at the
		// maximum retry age.
		if age := time.Since(m.Created); !m.Created.IsZero() && age >= s.retry.GiveUpAfter {
			return l.deadLetter(ctx, m, last.Status, fmt.Sprintf("not delivered after %d attempts in %v, the maximum retry age (RetryPolicy.GiveUpAfter)",
				m.Attempts+n, age.Round(time.Second)))
		}
		s.countDelivery(deliveryRetried)
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outboxMarkTimeout)
		if err := s.outbox.Attempted(mctx, m.Key); err != nil {
			s.log.Warn("rap: recording a callback attempt in the outbox failed", "url", redactedURL(m.URL), "key", m.Key, "error", err)
		}
		cancel()
		if sleepCtx(ctx, s.backoff(n, r.retryAfter)) != nil {
			return false
		}
	}
}

// refusalReason describes a final refusal for a dead letter.
func refusalReason(e *DeliveryError) string {
	b := e.Body
	if len(b) > 200 {
		b = b[:200] + "…"
	}
	return fmt.Sprintf("refused with HTTP %d (not retried): %q", e.Status, b)
}

// finish removes m from the outbox. It retries a failing store until ctx
// ends, since giving up would only resend a message already answered.
func (l *outboxLoop) finish(ctx context.Context, m OutboxMessage) bool {
	return l.retryStore(ctx, m, "removing a delivered callback from the outbox", func(ctx context.Context) error {
		return l.s.outbox.Delivered(ctx, m.Key)
	})
}

// deadLetter logs m once and moves it to the outbox's dead letters, or
// removes it when the outbox keeps none.
func (l *outboxLoop) deadLetter(ctx context.Context, m OutboxMessage, status int, reason string) bool {
	s := l.s
	s.countDelivery(deliveryDeadLettered)
	ds, ok := s.outbox.(DeadLetterStore)
	s.log.Error("rap: callback dead-lettered; it will not be retried", "url", redactedURL(m.URL), "key", m.Key,
		"status", status, "reason", reason, "kept", ok, "age", time.Since(m.Created).Round(time.Millisecond))
	if !ok {
		return l.finish(ctx, m)
	}
	return l.retryStore(ctx, m, "moving a callback to the dead letters", func(ctx context.Context) error {
		return ds.DeadLetter(ctx, m.Key, status, reason)
	})
}

// retryStore runs op until it succeeds (true) or ctx ends (false).
func (l *outboxLoop) retryStore(ctx context.Context, m OutboxMessage, what string, op func(context.Context) error) bool {
	s := l.s
	for n := 1; ; n++ {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outboxMarkTimeout)
		err := op(mctx)
		cancel()
		if err == nil {
			return true
		}
		s.log.Error("rap: "+what+" failed; retrying", "url", redactedURL(m.URL), "key", m.Key, "error", err)
		if sleepCtx(ctx, s.backoff(n, 0)) != nil {
			return false
		}
	}
}

// DeadLetters returns up to limit messages the Sender stopped delivering,
// oldest first, when its Outbox is a DeadLetterStore (nil otherwise).
func (s *Sender) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	ds, ok := s.outbox.(DeadLetterStore)
	if !ok {
		return nil, nil
	}
	return ds.DeadLetters(ctx, limit)
}

// callbackHead is the part of a callback body that names its call.
type callbackHead struct {
	Type       MessageType `json:"type"`
	GroupID    string      `json:"group_id"`
	ID         string      `json:"id"`
	CallID     string      `json:"call_id"`
	ToolCallID string      `json:"tool_call_id"`
	ViewType   string      `json:"view_type"`
}

// laneKey names the lane m is delivered in: the messages of one call (its
// thread's group_id and the invocation's id) to one callback URL. They go
// out in the order they were sent, whatever their type: a call's oauth or
// user_choice, the view updates it makes (ForID), its result and a
// subscription's events never overtake one another, while different
// calls' messages are delivered concurrently even when every call names
// the same callback URL (as seed 004's runtime and the reference runtime
// do), so one call whose callbacks keep failing holds up no other. A
// message that names no call keeps to its thread's lane, and one that
// names no thread to its URL's.
func laneKey(m OutboxMessage) string {
	g, id := peekLane(m.Body, m.ForID == "")
	if g == "" {
		return m.URL
	}
	if m.ForID != "" {
		id = m.ForID
	}
	if id == "" {
		return m.URL + "\x00" + g
	}
	return m.URL + "\x00" + g + "\x00" + id
}

// peekLane returns the top-level group_id of a callback body and, when
// wantID, the invocation it is about (its id, or a subscription event's
// tool_call_id); "" for what it does not name. It reads the body's members
// in order and stops once it has them, which the SDK writes first, so that
// a large result is not parsed whole.
func peekLane(body []byte, wantID bool) (group, id string) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", ""
	}
	haveGroup, haveID := false, !wantID
	for dec.More() && !(haveGroup && haveID) {
		t, err := dec.Token()
		if err != nil {
			return "", ""
		}
		key, _ := t.(string)
		switch {
		case key == "group_id" && !haveGroup:
			if dec.Decode(&group) != nil {
				return "", ""
			}
			haveGroup = true
			continue
		case (key == "id" || key == "tool_call_id") && !haveID:
			if dec.Decode(&id) != nil {
				id = ""
			}
			haveID = true
			continue
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return "", ""
		}
	}
	return group, id
}

// peekCallback reads the type and ids of a callback body; the zero value
// when it does not parse.
func peekCallback(body []byte) callbackHead {
	var h callbackHead
	_ = json.Unmarshal(body, &h)
	return h
}

// tooLargeReplacement returns, for a tool_result body, the body of the
// error result that replaces it after a 413.
func tooLargeReplacement(body []byte) ([]byte, bool) {
	h := peekCallback(body)
	if h.Type != TypeToolResult || h.GroupID == "" || h.ID == "" {
		return nil, false
	}
	r := tooLargeResult(len(body), http.StatusRequestEntityTooLarge)
	r.GroupID, r.ID, r.CallID = h.GroupID, h.ID, h.CallID
	small, err := r.MarshalJSON()
	return small, err == nil
}

// tooLargeResult is the "Error: " result sent instead of a result of size
// bytes that could not be delivered: over MaxCallbackBytes (status 0) or
// refused by the runtime with status (413).
func tooLargeResult(size, status int) *ToolResult {
	why := fmt.Sprintf("over the %d-byte limit of a RAP callback", MaxCallbackBytes)
	if status != 0 {
		why = fmt.Sprintf("more than the runtime accepts (it answered HTTP %d)", status)
	}
	return errorResult(fmt.Sprintf("the tool's result was too large to deliver: %d bytes, %s, so it was not sent. "+
		"Large data should be linked (a URL or a file path), not inlined; ask the tool for less, or for a link.", size, why))
}

// admit reports, for a Sender on the in-memory outbox of a Server without
// a Store, whether a new call whose callbacks go to url may be accepted,
// waiting up to MemoryAdmitWait for room (memoryOutbox.admit), and how
// many callbacks wait for its destination. Any other Sender admits every
// call.
func (s *Sender) admit(ctx context.Context, url string) (int, bool) {
	if o, ok := s.outbox.(*memoryOutbox); ok {
		return o.admit(ctx, url, MemoryAdmitWait)
	}
	return 0, true
}
