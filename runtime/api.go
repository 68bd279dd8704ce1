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
	case errors.Is(err, ErrUnknownThread):
		writeError(w, http.StatusNotFound, err.Error())
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
}

func (r *Runtime) serveThread(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	info := threadInfo{PendingCalls: []store.Call{}, Subscriptions: []store.Subscription{}}
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
		q, err := tx.Queued(id)
		info.Queued = len(q)
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
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if th, err = tx.Thread(id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, id)
			}
			return err
		}
		views, err = tx.ThreadViews(id)
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
	return out, nil
}
