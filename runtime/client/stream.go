package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// Event is one event of a thread's stream.
type Event struct {
	// ID is the event's id. The stream resumes after the last id it
	// returned; after one of a replay that was cut short, the runtime
	// answers with a reset and the replay afresh.
	ID string
	// Type is one of the api.Event* constants.
	Type string
	// ThreadID is the thread whose stream this is.
	ThreadID string
	// Data is the event's JSON payload.
	Data json.RawMessage
	// Payload is Data decoded by api.DecodeEvent: *api.TextDelta for
	// api.EventTextDelta, *api.Message for api.EventMessage, and so on;
	// json.RawMessage for a type this client does not know.
	Payload any
}

// StreamOptions configures Events.
type StreamOptions struct {
	// LastEventID, when set, resumes after that event: the stream starts
	// with the events missed since (or with a reset and a full replay when
	// the runtime no longer has them). Empty starts with a replay of the
	// thread's state.
	LastEventID string
	// RetryFor is how long the stream keeps reconnecting, after its
	// connection failed, before Next returns the error. Zero means one
	// minute; negative means Next returns the first failure.
	RetryFor time.Duration
	// OnReconnect, when set, is called before each attempt to reconnect,
	// with the error that ended the previous connection.
	OnReconnect func(err error)
}

// defaultRetryFor is StreamOptions.RetryFor's default.
const defaultRetryFor = time.Minute

// Stream is a thread's event stream (GET /v1/threads/{id}/events) that
// reconnects by itself after a disconnection, with the id of the last event
// it returned, so that Next returns every event once, in order. Use it from
// one goroutine; Close may be called from any.
type Stream struct {
	c        *Client
	ctx      context.Context
	cancel   context.CancelFunc
	threadID string
	opts     StreamOptions
	lastID   string
	body     io.ReadCloser
	rd       *bufio.Reader
}

// Events opens a thread's event stream. It returns an error, without
// retrying, when the first connection fails: the runtime is unreachable,
// refused the client token, or does not know the thread.
func (c *Client) Events(ctx context.Context, threadID string, opts StreamOptions) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{c: c, ctx: ctx, cancel: cancel, threadID: threadID, opts: opts, lastID: opts.LastEventID}
	if _, err := s.connect(); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// LastEventID returns the id of the last event Next returned that had one:
// open a stream with it as StreamOptions.LastEventID to resume later.
func (s *Stream) LastEventID() string { return s.lastID }

// Close ends the stream.
func (s *Stream) Close() error {
	s.cancel()
	if s.body != nil {
		s.body.Close()
	}
	return nil
}

// connect opens a connection resuming after s.lastID. retryAfter is the
// runtime's Retry-After of a 429 or 503 answer.
func (s *Stream) connect() (retryAfter time.Duration, err error) {
	path := threadPath(s.threadID, "events")
	req, err := s.c.request(s.ctx, "GET", path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	resp, err := s.c.send(req)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			retryAfter = time.Duration(n) * time.Second
		}
		return retryAfter, statusError("GET", path, resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return 0, fmt.Errorf("GET %s: the answer is %q, not an event stream (is %s a gorap runtime?)", path, ct, s.c.base)
	}
	s.body, s.rd = resp.Body, bufio.NewReaderSize(resp.Body, 64<<10)
	return 0, nil
}

// final reports whether a failure to connect is not worth retrying: the
// runtime answered, and not that it is busy or failing.
func final(err error) bool { return !Temporary(err) }

// Temporary reports whether err, from a Client method, may go away when
// the request is sent again later: the runtime could not be reached, or it
// answered 429 or a 5xx (it is busy, restarting, or behind a proxy with no
// backend for a moment). A refusal (any other 4xx) is not. The event
// stream retries exactly these failures by itself.
func Temporary(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if !errors.As(err, &e) {
		return true
	}
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// Next returns the stream's next event, waiting for it. After a
// disconnection it reconnects, resuming after the last event it returned;
// it returns an error when the context ends, the stream was closed, the
// runtime refuses the stream (a wrong token, an unknown thread), or it
// could not reconnect for StreamOptions.RetryFor.
func (s *Stream) Next() (Event, error) {
	var failedSince time.Time
	backoff := 100 * time.Millisecond
	for {
		if s.body != nil {
			ev, err := s.read()
			if err == nil {
				if ev.ID != "" {
					s.lastID = ev.ID
				}
				return ev, nil
			}
			s.body.Close()
			s.body = nil
			if s.ctx.Err() != nil {
				return Event{}, fmt.Errorf("event stream of thread %s: %w", s.threadID, context.Cause(s.ctx))
			}
			if s.opts.RetryFor < 0 {
				return Event{}, fmt.Errorf("event stream of thread %s ended: %w", s.threadID, err)
			}
			if s.opts.OnReconnect != nil {
				s.opts.OnReconnect(err)
			}
		}
		retryAfter, err := s.connect()
		if err == nil {
			continue
		}
		if s.ctx.Err() != nil {
			return Event{}, fmt.Errorf("event stream of thread %s: %w", s.threadID, context.Cause(s.ctx))
		}
		retryFor := s.opts.RetryFor
		if retryFor == 0 {
			retryFor = defaultRetryFor
		}
		if failedSince.IsZero() {
			failedSince = time.Now()
		}
		if final(err) || s.opts.RetryFor < 0 || time.Since(failedSince) > retryFor {
			return Event{}, fmt.Errorf("event stream of thread %s: %w", s.threadID, err)
		}
		wait := max(backoff, retryAfter)
		backoff = min(2*backoff, 5*time.Second)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
		}
	}
}

// maxEventBytes bounds one event of the stream.
const maxEventBytes = 64 << 20

// read reads the next event of the connection (Server-Sent Events).
func (s *Stream) read() (Event, error) {
	ev := Event{ThreadID: s.threadID}
	var data []byte
	hasData := false
	for {
		line, err := s.rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= maxEventBytes {
				line, err = s.rd.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		text := strings.TrimRight(string(line), "\r\n")
		if text == "" {
			if !hasData {
				ev = Event{ThreadID: s.threadID}
				continue
			}
			ev.Data = data
			payload, err := api.DecodeEvent(ev.Type, data)
			if err != nil {
				return Event{}, fmt.Errorf("event %s of thread %s: %w", ev.ID, s.threadID, err)
			}
			ev.Payload = payload
			return ev, nil
		}
		if text[0] == ':' {
			continue // a comment: connected, keep-alive
		}
		field, value, _ := strings.Cut(text, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Type = value
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
		if len(data) > maxEventBytes {
			return Event{}, fmt.Errorf("an event of thread %s is larger than %d bytes", s.threadID, maxEventBytes)
		}
	}
}

// EventsURL returns the URL of a thread's event stream resuming after
// lastEventID (none when empty), with the id in the query: for clients,
// such as a browser's EventSource, that cannot set Last-Event-ID on their
// first request.
func (c *Client) EventsURL(threadID, lastEventID string) string {
	u := c.base + threadPath(threadID, "events")
	if lastEventID != "" {
		u += "?" + api.LastEventIDParam + "=" + url.QueryEscape(lastEventID)
	}
	return u
}
