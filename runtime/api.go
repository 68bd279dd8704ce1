package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// maxRequestBytes bounds a client API request body.
const maxRequestBytes = MaxMessageBytes + 4096

// sseKeepAlive is how often an idle event stream sends a comment line.
const sseKeepAlive = 15 * time.Second

// Handler returns the runtime's HTTP handler: the client API under /v1 and
// the callback endpoint under /rap/callback/ (see docs/api.md).
func (r *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/threads", r.serveCreateThread)
	mux.HandleFunc("GET /v1/threads", r.serveListThreads)
	mux.HandleFunc("GET /v1/threads/{id}", r.serveThread)
	mux.HandleFunc("POST /v1/threads/{id}/messages", r.servePostMessage)
	mux.HandleFunc("GET /v1/threads/{id}/messages", r.serveHistory)
	mux.HandleFunc("GET /v1/threads/{id}/events", r.serveEvents)
	mux.HandleFunc("POST /v1/threads/{id}/close", r.serveClose)
	mux.HandleFunc("GET /v1/threads/{id}/choices", r.serveChoices)
	mux.HandleFunc("POST /v1/threads/{id}/choices/{call_id}", r.serveAnswerChoice)
	mux.HandleFunc("POST "+CallbackPath+"{token}", r.serveCallback)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// writeStoreError maps runtime errors to HTTP answers.
func (r *Runtime) writeStoreError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrUnknownThread), errors.Is(err, ErrNoChoice):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrChoiceDelivery):
		writeError(w, http.StatusBadGateway, err.Error())
	case errors.Is(err, ErrBadInput):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		r.log.Error("client API request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error; see the runtime log")
	}
}

// readJSON decodes a bounded JSON body into v.
func readJSON(w http.ResponseWriter, req *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("request body is larger than %d bytes", maxRequestBytes)
		}
		return fmt.Errorf("reading the request body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body is not the expected JSON object: %w", err)
	}
	if dup := duplicateMember(body); dup != "" {
		return duplicateMemberError(dup)
	}
	return nil
}

func (r *Runtime) serveCreateThread(w http.ResponseWriter, req *http.Request) {
	var body struct {
		// UserID is the session's end user (issue 9 item 4); empty means
		// Config.DefaultUserID.
		UserID string `json:"user_id"`
	}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	id, err := r.CreateThreadFor(req.Context(), body.UserID)
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	resp := api.CreateThreadResponse{ID: id}
	r.mu.Lock()
	if s := r.catalogs[id]; s != nil {
		resp.Toolsets = s.toolsets()
	}
	r.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}

// serveListThreads answers GET /v1/threads one page at a time (issue 9
// item 18): ?limit= (default 100, at most 1000), ?cursor= (the previous
// page's next_cursor) and ?parent_id= (only that thread's children). The
// answer is {"threads": [...], "next_cursor": "..."}; next_cursor is absent
// on the last page.
func (r *Runtime) serveListThreads(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	limit := defaultPageLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a whole number from 1 to %d", v, maxPageLimit))
			return
		}
		limit = min(n, maxPageLimit)
	}
	after, err := decodeCursor(q.Get("cursor"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	parent := q.Get("parent_id")
	var page []store.Thread
	err = r.store.View(req.Context(), func(tx store.Tx) error {
		var err error
		if parent != "" {
			page, err = tx.ChildThreads(parent, after, limit+1)
		} else {
			page, err = tx.ThreadsPage(after, limit+1)
		}
		return err
	})
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	resp := api.ThreadPage{Threads: page}
	if len(page) > limit {
		resp.Threads = page[:limit]
		resp.NextCursor = encodeCursor(store.CursorOf(page[limit-1]))
	}
	if resp.Threads == nil {
		resp.Threads = []api.Thread{}
	}
	writeJSON(w, http.StatusOK, resp)
}

// Page sizes of GET /v1/threads.
const (
	defaultPageLimit = 100
	maxPageLimit     = 1000
)

// maxStatusChildren is how many children GET /v1/threads/{id} lists; past
// it the answer has children_next_cursor, to read the rest from
// GET /v1/threads?parent_id={id}&cursor=.
const maxStatusChildren = 1000

// encodeCursor makes an opaque page cursor of c.
func encodeCursor(c store.ThreadCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Created.UnixNano(), 10) + ":" + c.ID))
}

// decodeCursor reads a cursor made by encodeCursor; "" is the start.
func decodeCursor(s string) (store.ThreadCursor, error) {
	if s == "" {
		return store.ThreadCursor{}, nil
	}
	bad := fmt.Errorf("cursor %q is not one this runtime gave: pass the next_cursor of the previous page, or no cursor to start over", s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.ThreadCursor{}, bad
	}
	ns, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return store.ThreadCursor{}, bad
	}
	return store.ThreadCursor{Created: time.Unix(0, n).UTC(), ID: id}, nil
}

func (r *Runtime) serveThread(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	var info api.ThreadInfo
	err := r.store.View(req.Context(), func(tx store.Tx) error {
		var err error
		info, err = r.readThreadInfo(tx, id)
		return err
	})
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// readThreadInfo reads the answer of GET /v1/threads/{id}.
func (r *Runtime) readThreadInfo(tx store.Tx, id string) (api.ThreadInfo, error) {
	info := api.ThreadInfo{PendingCalls: []store.Call{}, Subscriptions: []store.Subscription{}, Children: []string{}, Choices: []store.Choice{}}
	var err error
	if info.Thread, err = tx.Thread(id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return info, fmt.Errorf("%w %q", ErrUnknownThread, id)
		}
		return info, err
	}
	// Every read below is an indexed lookup of this thread's rows
	// (issue 9 item 18): no scan of all threads.
	calls, err := tx.PendingCalls(id)
	if err != nil {
		return info, err
	}
	info.PendingCalls = append(info.PendingCalls, calls...)
	subs, err := tx.ThreadSubscriptions(id)
	if err != nil {
		return info, err
	}
	info.Subscriptions = append(info.Subscriptions, subs...)
	kids, err := tx.ChildThreads(id, store.ThreadCursor{}, maxStatusChildren+1)
	if err != nil {
		return info, err
	}
	if len(kids) > maxStatusChildren {
		kids = kids[:maxStatusChildren]
		info.ChildrenNextCursor = encodeCursor(store.CursorOf(kids[len(kids)-1]))
	}
	for _, k := range kids {
		info.Children = append(info.Children, k.ID)
	}
	choices, err := tx.ThreadChoices(id)
	if err != nil {
		return info, err
	}
	info.Choices = append(info.Choices, choices...)
	q, err := tx.Queued(id)
	if err != nil {
		return info, err
	}
	info.Queued = len(q)
	if info.LastSeq, err = tx.LastSeq(id); err != nil {
		return info, err
	}
	info.Usage = r.usage.get(id)
	return info, nil
}

func (r *Runtime) servePostMessage(w http.ResponseWriter, req *http.Request) {
	var body struct {
		Text *string `json:"text"`
	}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if body.Text == nil {
		writeError(w, http.StatusBadRequest, `missing "text": send {"text": "..."}`)
		return
	}
	added, err := r.postMessage(req.Context(), req.PathValue("id"), *body.Text, req.Header.Get("Idempotency-Key"))
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	status := "queued"
	if !added {
		status = "duplicate"
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": status})
}

func (r *Runtime) serveHistory(w http.ResponseWriter, req *http.Request) {
	msgs, err := r.History(req.Context(), req.PathValue("id"))
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	if msgs == nil {
		msgs = []store.Message{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

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

// serveEvents streams the thread's events as Server-Sent Events (issue 15
// item 1). A client without Last-Event-ID first receives the thread's
// state (see replayEvents), then a replay_done marker, then live events; a
// client whose Last-Event-ID is still in the thread's log receives exactly
// the events it missed, then the marker; any other Last-Event-ID gets a
// reset event and a full replay. Live events carry an "id:" line. Streams
// are bounded (issue 9 item 12): so many per thread and in total (429 and
// 503 past them), each event write has a deadline, and a client that falls
// StreamLimits.BufferBytes behind is disconnected; it may reconnect and
// resume.
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
	sub, cancel, att, err := r.attach(req.Context(), id, lastID)
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
			r.hub.forget(id)
			r.writeStoreError(w, err)
			return
		}
	}
	// Dropped for falling behind: end a write blocked on the client now,
	// which frees this stream's slot and memory without waiting for the
	// write deadline. (cancel closes sub first, so this never runs after
	// the handler returned.)
	sub.setKick(func() { rc.SetWriteDeadline(time.Now()) })
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
		return rc.Flush() == nil
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
// starts afresh receives before live ones (issue 15 item 1): a reset event
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
		out = append(out, messageEvents(id, m)...)
	}
	for _, v := range views {
		add(EventView, api.View{ViewType: v.ViewType, Content: v.Content})
	}
	for _, c := range info.Choices {
		add(EventUserChoice, choiceEvent(c))
	}
	if r.hub.sh != nil {
		links, err := r.sharedOAuthLinks(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, links...)
	} else {
		r.mu.Lock()
		for _, e := range r.authShown[id] {
			out = append(out, e)
		}
		r.mu.Unlock()
	}
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

func (r *Runtime) serveClose(w http.ResponseWriter, req *http.Request) {
	var body struct{}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := r.CloseThread(req.Context(), req.PathValue("id")); err != nil {
		r.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "closed"})
}

func (r *Runtime) serveChoices(w http.ResponseWriter, req *http.Request) {
	choices, err := r.PendingChoices(req.Context(), req.PathValue("id"))
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	if choices == nil {
		choices = []store.Choice{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"choices": choices})
}

func (r *Runtime) serveAnswerChoice(w http.ResponseWriter, req *http.Request) {
	var body struct {
		Selected *int `json:"selected"`
		Dismiss  bool `json:"dismiss"`
	}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if body.Selected == nil && !body.Dismiss {
		writeError(w, http.StatusBadRequest, `send {"selected": <index>} to answer, or {"dismiss": true} to send the default`)
		return
	}
	if body.Selected != nil && body.Dismiss {
		writeError(w, http.StatusBadRequest, `send either "selected" or "dismiss", not both`)
		return
	}
	sel, err := r.AnswerChoice(req.Context(), req.PathValue("id"), req.PathValue("call_id"), body.Selected)
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "sent", "selected": sel})
}
