package runtime

// This file owns the announcement of a slice's inputs when the slice takes
// them: the user messages, tool results, subscription events and reports
// a completion answers are published before any output of that completion
// (causal order at the source), with the Seq each will be saved under.
// The commit that saves them does not announce them again, and a client
// that connects while the completion runs finds them in its replay.

import (
	"encoding/json"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// inflightInputs are the inputs of a thread announced before they were
// saved, with the Seq each will be saved under, and the key of each (to
// recognise it when the commit saves it).
type inflightInputs struct {
	// base is the Seq of the thread's last saved message when they were
	// announced; the first of them is saved under base+1.
	base int64
	// keys are set when the inputs were published (someone watched the
	// thread); then the commit does not publish them again.
	keys []string
	msgs []store.Message
}

// inputKey identifies a message by what the client sees of it but its
// time: the same input announced before its commit and saved by it has
// the same key.
func inputKey(m store.Message) string {
	m.Created, m.Seq, m.Usage = time.Time{}, 0, nil
	b, _ := json.Marshal(apiMessage(m))
	return string(b)
}

// announceInputs publishes the messages a slice is about to answer, msgs,
// as the events they will be announced with once saved, numbered after
// base (the Seq of the thread's last saved message). Inputs already
// announced by an earlier attempt of this process (a completion that
// failed leaves its inputs queued) are not announced twice.
func (r *Runtime) announceInputs(threadID string, base int64, msgs []store.Message) {
	if len(msgs) == 0 {
		return
	}
	h := r.hub
	watched := h.watched(threadID) // else skip the encoding
	in := &inflightInputs{base: base, msgs: make([]store.Message, len(msgs))}
	now := time.Now().UTC()
	for i, m := range msgs {
		m.ThreadID, m.Seq = threadID, base+int64(i)+1
		if m.Created.IsZero() {
			m.Created = now
		}
		in.msgs[i] = m
	}
	var events []Event
	if watched {
		in.keys = make([]string, len(msgs))
		for i, m := range in.msgs {
			in.keys[i] = inputKey(m)
		}
		events = in.events()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.goneLocked(threadID) {
		return
	}
	prev := h.inflight[threadID]
	h.inflight[threadID] = in
	for _, e := range events {
		if prev != nil && prev.base == base && prev.has(e.msgSeq, in.keys[e.msgSeq-base-1]) {
			continue // announced by the failed attempt before
		}
		h.ev.publishLocked(e)
	}
}

// events returns the events announcing the inputs.
func (in *inflightInputs) events() []Event {
	var out []Event
	for _, m := range in.msgs {
		out = append(out, messageEvents(m.ThreadID, apiMessage(m))...)
	}
	return out
}

// has reports whether the message of Seq seq was announced with key.
func (in *inflightInputs) has(seq int64, key string) bool {
	i := seq - in.base - 1
	return i >= 0 && i < int64(len(in.keys)) && in.keys[i] == key
}

// announcedLocked reports whether m, a message just saved, was announced
// before its commit by announceInputs, and forgets the thread's inflight
// inputs once a saved message follows them. h.mu is held.
func (h *hub) announcedLocked(threadID string, m store.Message) bool {
	in := h.inflight[threadID]
	if in == nil {
		return false
	}
	if m.Seq > in.base+int64(len(in.msgs)) || m.Seq <= in.base {
		delete(h.inflight, threadID)
		return false
	}
	return len(in.keys) > 0 && in.has(m.Seq, inputKey(m))
}

// dropInflight forgets the thread's announced inputs: they were discarded,
// or another process answers them now.
func (h *hub) dropInflight(threadID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.inflight, threadID)
}

// inflightLocked returns the events of the thread's inputs announced but
// not yet saved; h.mu is held.
//
// A client gets them in its replay: the commit must not publish them
// again, even when nobody watched the thread when they were taken.
func (h *hub) inflightLocked(threadID string) []Event {
	in := h.inflight[threadID]
	if in == nil {
		return nil
	}
	if in.keys == nil {
		in.keys = make([]string, len(in.msgs))
		for i, m := range in.msgs {
			in.keys[i] = inputKey(m)
		}
	}
	return in.events()
}
