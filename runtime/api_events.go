package runtime

// This file owns the client API's event stream, GET
// /v1/threads/{id}/events: Server-Sent Events, with a replay of the history
// or a resume after Last-Event-ID before the live events.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// sseKeepAlive is how often an idle event stream sends a comment line.
const sseKeepAlive = 15 * time.Second

// Pieces of the Server-Sent Events framing.
var (
	sseConnected     = []byte(": connected\n\n")
	sseKeepAliveLine = []byte(": keep-alive\n\n")
	sseIDPrefix      = []byte("id: ")
	sseEventPrefix   = []byte("event: ")
	sseNewline       = []byte("\n")
	sseData          = []byte("\ndata: ")
	sseEnd           = []byte("\n\n")
)

// LastEventIDParam is the query parameter that may carry the Last-Event-ID
// of GET /v1/threads/{id}/events, for clients that cannot set the header.
const LastEventIDParam = api.LastEventIDParam

// serveEvents streams the thread's events as Server-Sent Events. A client
// without Last-Event-ID first receives the thread's state (see replayEvents),
// then a replay_done marker, then live events; a client whose Last-Event-ID
// is still in the thread's log receives exactly the events it missed, then
// the marker; any other Last-Event-ID gets a reset event and a full replay.
// Live events carry an "id:" line. Streams are bounded: so many per thread
// and in total (429 and 503 past them), each event write has a deadline, and
// a client that falls StreamLimits.BufferBytes behind is disconnected; it may
// reconnect and resume.
func (r *Runtime) serveEvents(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	rc := http.NewResponseController(w)
	release, err := r.hub.openStream(id)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		status := http.StatusServiceUnavailable
		msg := fmt.Sprintf("the runtime serves its maximum of %d event streams; retry later", r.hub.limits.Total)
		if errors.Is(err, errTooManyStreams) {
			status = http.StatusTooManyRequests
			msg = fmt.Sprintf("thread %q already has its maximum of %d event streams; close one or retry later", id, r.hub.limits.PerThread)
		}
		writeError(w, status, msg)
		return
	}
	defer release()
	limitSendBuffer(req)
	lastID := req.Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = req.URL.Query().Get(LastEventIDParam)
	}
	sub, cancel, att, err := r.coord.attach(req.Context(), id, lastID)
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	defer cancel()
	var replay []Event
	// replayedSeq is the Seq of the last history message replayed: live
	// events of messages up to it were replayed already. -1: none.
	replayedSeq := int64(-1)
	if !att.resumed {
		replay, replayedSeq, err = r.replayEvents(req.Context(), id, att)
		if err != nil {
			cancel()
			r.coord.forget(id)
			r.writeStoreError(w, err)
			return
		}
	}
	// Dropped for falling behind: end a write blocked on the client now,
	// which frees this stream's slot and memory without waiting for the
	// write deadline. (cancel closes sub first, so this never runs after
	// the handler returned.)
	sub.setKick(func() { rc.SetWriteDeadline(time.Now()) })
	// ended says why the stream ended early, if the runtime ended it: it
	// is logged once, with the thread and the client's address.
	// A client that merely went away is not logged above Debug.
	var ended string
	var endErr error
	defer func() {
		switch why := sub.dropReason(); {
		case why != "":
			r.log.Warn("event stream dropped", "thread", id, "client", req.RemoteAddr, "reason", why)
		case errors.Is(endErr, os.ErrDeadlineExceeded):
			r.log.Warn("event stream dropped", "thread", id, "client", req.RemoteAddr, "reason", ended)
		case ended != "":
			r.log.Debug("event stream ended", "thread", id, "client", req.RemoteAddr, "reason", ended)
		}
	}()
	// The server's read and write timeouts bound whole requests; a stream
	// lives as long as its client reads it. Clear the read deadline (the
	// request has no body) and give each write its own deadline.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return
	}
	timeout := r.hub.limits.WriteTimeout
	// write writes its parts as they are (no formatting copy of a large
	// payload) under a fresh write deadline; flush sends what is buffered.
	write := func(parts ...[]byte) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		// A kick (the subscriber dropped) before the deadline above was
		// overwritten by it: stop here. One after it cuts the write.
		if sub.isClosed() {
			return false
		}
		for _, p := range parts {
			if _, err := w.Write(p); err != nil {
				ended, endErr = fmt.Sprintf("writing to the client failed or took longer than %v: %v", timeout, err), err
				return false
			}
		}
		return true
	}
	writeEvent := func(e Event) bool {
		if e.ID != "" && !write(sseIDPrefix, []byte(e.ID), sseNewline) {
			return false
		}
		return write(sseEventPrefix, []byte(e.Type), sseData, e.Data, sseEnd)
	}
	flush := func() bool {
		if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		// A kick (the subscriber dropped) before the deadline above was
		// overwritten by it: stop here. One after it cuts the write.
		if sub.isClosed() {
			return false
		}
		if err := rc.Flush(); err != nil {
			ended, endErr = fmt.Sprintf("sending to the client failed or took longer than %v: %v", timeout, err), err
			return false
		}
		return true
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !write(sseConnected) {
		return
	}
	for i, e := range replay {
		if !writeEvent(e) {
			return
		}
		replay[i] = Event{}
	}
	if !flush() {
		return
	}
	keep := time.NewTicker(sseKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-keep.C:
			if !write(sseKeepAliveLine) || !flush() {
				return
			}
		case <-sub.ready:
			if req.Context().Err() != nil {
				return // select chose among ready cases at random: the end wins
			}
			events, closed := sub.take()
			if closed {
				return
			}
			// One flush per batch: a client that keeps up gets each event
			// at once, one that lags gets them in fewer, larger writes.
			for i, e := range events {
				if e.msgSeq > 0 && e.msgSeq <= replayedSeq {
					continue // replayed from the history already
				}
				if !writeEvent(e) {
					return
				}
				events[i] = Event{} // let the written payload go
			}
			if !flush() {
				return
			}
		}
	}
}

// replayEvents returns the thread's state as the events a client that
// starts afresh receives before live ones: a reset event
// when its Last-Event-ID could not be resumed; the session's toolsets; the
// thread's state (thread); the history as the message, tool_call and
// tool_result events it was announced with; every current view (RAP VU-2);
// every user choice waiting for an answer; every oauth link of a call still
// waiting for authorization; the text the running completion streamed so
// far as one text_delta; and the replay_done marker. It also returns the
// Seq of the last history message replayed.
func (r *Runtime) replayEvents(ctx context.Context, id string, att attachment) ([]Event, int64, error) {
	var info api.ThreadInfo
	var history []store.Message
	var views []store.View
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if info, err = r.readThreadInfo(tx, id); err != nil {
			return err
		}
		if history, err = tx.History(id); err != nil {
			return err
		}
		views, err = tx.ThreadViews(id)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	lastSeq := lastSeqOf(history)
	var out []Event
	add := func(typ string, data any) {
		b, _ := json.Marshal(data)
		out = append(out, Event{Type: typ, ThreadID: id, Data: b})
	}
	if att.reset != "" {
		add(EventReset, api.Reset{Reason: att.reset})
	}
	if s, err := r.sessionOf(ctx, info.RootID); err == nil {
		add(EventToolsets, s.toolsets())
	}
	add(EventThread, info)
	for _, m := range history {
		out = append(out, messageEvents(id, apiMessage(m))...)
	}
	for _, v := range views {
		add(EventView, api.View{ViewType: v.ViewType, Content: v.Content})
	}
	for _, c := range info.Choices {
		add(EventUserChoice, choiceEvent(c))
	}
	links, err := r.coord.authEvents(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	out = append(out, links...)
	// The running completion's text, unless its turn was saved (and so
	// replayed above) between the attach and the read.
	if att.hasTurn && att.turn != "" && att.base == lastSeq {
		add(EventTextDelta, api.TextDelta{Text: att.turn})
	}
	mode := api.ReplayFull
	if att.reset != "" {
		mode = api.ReplayReset
	}
	// Replayed events have ids of their own, so that a client cut off
	// during the replay (a browser's EventSource reconnects with the last
	// id it saw) is recognised and starts afresh.
	for i := range out {
		out[i].ID = att.mark + replayIDSep + strconv.Itoa(i+1)
	}
	out = append(out, replayDone(id, att.mark, mode, lastSeq))
	return out, lastSeq, nil
}
