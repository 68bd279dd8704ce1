package httpapi

// This file owns the client API's event stream, GET
// /v1/threads/{id}/events: Server-Sent Events of an api.EventStream, a
// replay of the history or a resume after Last-Event-ID before the live
// events.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/gorap/gorap/runtime/api"
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

// serveEvents streams the thread's events as Server-Sent Events. A client
// without Last-Event-ID first receives the thread's state, then a
// replay_done marker, then live events; a client whose Last-Event-ID is
// still in the thread's log receives exactly the events it missed, then
// the marker; any other Last-Event-ID gets a reset event and a full replay
// (Engine.FollowEvents decides). Live events carry an "id:" line. Streams
// are bounded: so many per thread and in total (429 and 503 past them),
// each event write has a deadline (Options.StreamWriteTimeout), and a
// client that falls too far behind is disconnected; it may reconnect and
// resume.
func (s *server) serveEvents(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	rc := http.NewResponseController(w)
	lastID := req.Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = req.URL.Query().Get(api.LastEventIDParam)
	}
	stream, err := s.e.FollowEvents(req.Context(), id, lastID)
	if err != nil {
		switch {
		case errors.Is(err, api.ErrTooManyStreams):
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusTooManyRequests, err.Error())
		case errors.Is(err, api.ErrStreamsFull):
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, err.Error())
		default:
			s.writeEngineError(w, err)
		}
		return
	}
	defer stream.Close()
	limitSendBuffer(req)
	replay := stream.Replay()
	// Dropped for falling behind: end a write blocked on the client now,
	// which frees this stream's slot and memory without waiting for the
	// write deadline. (Close ends the stream first, so this never runs
	// after the handler returned.)
	stream.OnDrop(func() { rc.SetWriteDeadline(time.Now()) })
	// ended says why the stream ended early, if the runtime ended it: it
	// is logged once, with the thread and the client's address.
	// A client that merely went away is not logged above Debug.
	var ended string
	var endErr error
	log := s.opts.Log
	defer func() {
		switch why := stream.DropReason(); {
		case why != "":
			log.Warn("event stream dropped", "thread", id, "client", req.RemoteAddr, "reason", why)
		case errors.Is(endErr, os.ErrDeadlineExceeded):
			log.Warn("event stream dropped", "thread", id, "client", req.RemoteAddr, "reason", ended)
		case ended != "":
			log.Debug("event stream ended", "thread", id, "client", req.RemoteAddr, "reason", ended)
		}
	}()
	// The server's read and write timeouts bound whole requests; a stream
	// lives as long as its client reads it. Clear the read deadline (the
	// request has no body) and give each write its own deadline.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return
	}
	timeout := s.opts.StreamWriteTimeout
	// write writes its parts as they are (no formatting copy of a large
	// payload) under a fresh write deadline; flush sends what is buffered.
	write := func(parts ...[]byte) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		// A kick (the stream dropped) before the deadline above was
		// overwritten by it: stop here. One after it cuts the write.
		if stream.Closed() {
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
	writeEvent := func(e api.Event) bool {
		if e.ID != "" && !write(sseIDPrefix, []byte(e.ID), sseNewline) {
			return false
		}
		return write(sseEventPrefix, []byte(e.Type), sseData, e.Data, sseEnd)
	}
	flush := func() bool {
		if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		// A kick (the stream dropped) before the deadline above was
		// overwritten by it: stop here. One after it cuts the write.
		if stream.Closed() {
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
		replay[i] = api.Event{}
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
		case <-stream.Ready():
			if req.Context().Err() != nil {
				return // select chose among ready cases at random: the end wins
			}
			events, closed := stream.Next()
			if closed {
				return
			}
			// One flush per batch: a client that keeps up gets each event
			// at once, one that lags gets them in fewer, larger writes.
			for i, e := range events {
				if !writeEvent(e) {
					return
				}
				events[i] = api.Event{} // let the written payload go
			}
			if !flush() {
				return
			}
		}
	}
}
