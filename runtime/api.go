package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

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
	var body struct{}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	id, err := r.CreateThread(req.Context())
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	resp := map[string]any{"id": id}
	r.mu.Lock()
	if s := r.catalogs[id]; s != nil {
		resp["toolsets"] = s
	}
	r.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}

func (r *Runtime) serveListThreads(w http.ResponseWriter, req *http.Request) {
	threads, err := r.Threads(req.Context())
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	if threads == nil {
		threads = []store.Thread{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"threads": threads})
}

// threadInfo is the answer of GET /v1/threads/{id}.
type threadInfo struct {
	store.Thread
	PendingCalls  []store.Call         `json:"pending_calls"`
	Subscriptions []store.Subscription `json:"subscriptions"`
	Queued        int                  `json:"queued"`
	// LastSeq is the Seq of the thread's last saved message. Events are
	// published after the save, so a client compares it with the last
	// message event it saw to know its stream has caught up.
	LastSeq int64 `json:"last_seq"`
	// Children are the ids of the thread's child threads, oldest first.
	Children []string `json:"children"`
	// Choices are the user choices waiting for an answer (RAP UC-1).
	Choices []store.Choice `json:"choices"`
}

func (r *Runtime) serveThread(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	info := threadInfo{PendingCalls: []store.Call{}, Subscriptions: []store.Subscription{}, Children: []string{}, Choices: []store.Choice{}}
	err := r.store.View(req.Context(), func(tx store.Tx) error {
		var err error
		if info.Thread, err = tx.Thread(id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, id)
			}
			return err
		}
		calls, err := tx.ThreadCalls(id)
		if err != nil {
			return err
		}
		for _, c := range calls {
			if c.State.Pending() {
				info.PendingCalls = append(info.PendingCalls, c)
			}
		}
		subs, err := tx.ThreadSubscriptions(id)
		if err != nil {
			return err
		}
		info.Subscriptions = append(info.Subscriptions, subs...)
		all, err := tx.ListThreads()
		if err != nil {
			return err
		}
		for _, t := range all {
			if t.ParentID == id {
				info.Children = append(info.Children, t.ID)
			}
		}
		choices, err := tx.ThreadChoices(id)
		if err != nil {
			return err
		}
		info.Choices = append(info.Choices, choices...)
		q, err := tx.Queued(id)
		if err != nil {
			return err
		}
		info.Queued = len(q)
		info.LastSeq, err = tx.LastSeq(id)
		return err
	})
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
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

// serveEvents streams the thread's events as Server-Sent Events. A new
// client first receives the session's toolsets and every current view
// (RAP VU-2), then live events.
func (r *Runtime) serveEvents(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported by this server")
		return
	}
	prime, err := r.primeEvents(req.Context(), id)
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	events, cancel := r.hub.subscribe(id, prime)
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	flusher.Flush()
	keep := time.NewTicker(sseKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		case e, ok := <-events:
			if !ok {
				return
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Type, e.Data)
			flusher.Flush()
		}
	}
}

// primeEvents returns the events a new event-stream client starts with.
func (r *Runtime) primeEvents(ctx context.Context, id string) ([]Event, error) {
	var th store.Thread
	var views []store.View
	var choices []store.Choice
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if th, err = tx.Thread(id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, id)
			}
			return err
		}
		if views, err = tx.ThreadViews(id); err != nil {
			return err
		}
		choices, err = tx.ThreadChoices(id)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []Event
	if s, err := r.sessionOf(ctx, th.RootID); err == nil {
		b, _ := json.Marshal(s)
		out = append(out, Event{Type: EventToolsets, ThreadID: id, Data: b})
	}
	for _, v := range views {
		b, _ := json.Marshal(map[string]any{"view_type": v.ViewType, "content": v.Content})
		out = append(out, Event{Type: EventView, ThreadID: id, Data: b})
	}
	for _, c := range choices {
		b, _ := json.Marshal(choiceEvent(c))
		out = append(out, Event{Type: EventUserChoice, ThreadID: id, Data: b})
	}
	r.mu.Lock()
	for _, e := range r.authShown[id] {
		out = append(out, e)
	}
	r.mu.Unlock()
	return out, nil
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
