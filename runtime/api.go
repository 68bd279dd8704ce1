package runtime

// This file owns the client API under /v1 (docs/api.md) but its event
// stream (api_events.go): the routes, threads, messages, history, close
// and user choices, each a thin layer over the Go API (threadapi.go,
// close.go, choices.go). Handler also mounts the callback endpoint
// (callback.go).

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// maxRequestBytes bounds a client API request body.
const maxRequestBytes = MaxMessageBytes + 4096

// Handler returns the runtime's HTTP handler: the client API under /v1 and
// the callback endpoint under /rap/callback/ (see docs/api.md). The client
// API refuses what web pages could send it (see WebGuard), and is guarded
// by Config.ClientAuth, or without it answers loopback addresses only (see
// Config.InsecureClientAPI).
func (r *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/threads", r.serveCreateThread)
	mux.HandleFunc("GET /v1/threads", r.serveListThreads)
	mux.HandleFunc("GET /v1/threads/{id}", r.owned(r.serveThread))
	mux.HandleFunc("POST /v1/threads/{id}/messages", r.owned(r.servePostMessage))
	mux.HandleFunc("GET /v1/threads/{id}/messages", r.owned(r.serveHistory))
	mux.HandleFunc("GET /v1/threads/{id}/events", r.owned(r.serveEvents))
	mux.HandleFunc("POST /v1/threads/{id}/close", r.owned(r.serveClose))
	mux.HandleFunc("GET /v1/threads/{id}/choices", r.owned(r.serveChoices))
	mux.HandleFunc("POST /v1/threads/{id}/choices/{call_id}", r.owned(r.serveAnswerChoice))
	mux.HandleFunc("POST "+CallbackPath+"{token}", r.serveCallback)
	return r.WebGuard(r.clientAuth(mux))
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

// invalidUTF8At returns the offset of the first byte of b that is not
// part of valid UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
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
	if !utf8.Valid(body) {
		return fmt.Errorf("request body is not valid UTF-8 (the first bad byte is at offset %d): send text encoded as UTF-8", invalidUTF8At(body))
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
		// UserID is the session's end user; empty means
		// Config.DefaultUserID.
		UserID string `json:"user_id"`
	}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if user, scoped := scopedUser(req); scoped {
		if body.UserID != "" && body.UserID != user {
			writeError(w, http.StatusForbidden, fmt.Sprintf("user_id %q: this client's token acts for user %q only; leave user_id out", body.UserID, user))
			return
		}
		body.UserID = user
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

// serveListThreads answers GET /v1/threads one page at a time: ?limit=
// (default 100, at most 1000), ?cursor= (the previous page's next_cursor) and
// ?parent_id= (only that thread's children). The answer is {"threads": [...],
// "next_cursor": "..."}; next_cursor is absent on the last page.
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
	user, scoped := scopedUser(req)
	var page []store.Thread
	err = r.store.View(req.Context(), func(tx store.Tx) error {
		var err error
		switch {
		case parent != "" && scoped:
			// Children belong to their parent's user: a foreign parent
			// lists nothing, as an unknown one does.
			p, err := tx.Thread(parent)
			if errors.Is(err, store.ErrNotFound) || (err == nil && p.UserID != user) {
				return nil
			}
			if err != nil {
				return err
			}
			page, err = tx.ChildThreads(parent, after, limit+1)
			return err
		case parent != "":
			page, err = tx.ChildThreads(parent, after, limit+1)
		case scoped:
			page, err = tx.UserThreadsPage(user, after, limit+1)
		default:
			page, err = tx.ThreadsPage(after, limit+1)
		}
		return err
	})
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	var resp api.ThreadPage
	if len(page) > limit {
		page = page[:limit]
		resp.NextCursor = encodeCursor(store.CursorOf(page[limit-1]))
	}
	resp.Threads = apiSlice(page, apiThread)
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
	info, err := r.ThreadInfo(req.Context(), req.PathValue("id"))
	if err != nil {
		r.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// readThreadInfo reads the answer of GET /v1/threads/{id}.
func (r *Runtime) readThreadInfo(tx store.Tx, id string) (api.ThreadInfo, error) {
	info := api.ThreadInfo{PendingCalls: []api.Call{}, Subscriptions: []api.Subscription{}, Children: []string{}, Choices: []api.Choice{}}
	th, err := tx.Thread(id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return info, fmt.Errorf("%w %q", ErrUnknownThread, id)
		}
		return info, err
	}
	info.Thread = apiThread(th)
	// Every read below is an indexed lookup of this thread's rows:
	// no scan of all threads.
	calls, err := tx.PendingCalls(id)
	if err != nil {
		return info, err
	}
	for _, c := range calls {
		info.PendingCalls = append(info.PendingCalls, apiCall(c))
	}
	subs, err := tx.ThreadSubscriptions(id)
	if err != nil {
		return info, err
	}
	for _, s := range subs {
		info.Subscriptions = append(info.Subscriptions, apiSubscription(s))
	}
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
	for _, c := range choices {
		info.Choices = append(info.Choices, apiChoice(c))
	}
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
		msgs = []api.Message{}
	}
	writeJSON(w, http.StatusOK, api.HistoryResponse{Messages: msgs})
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
		choices = []api.Choice{}
	}
	writeJSON(w, http.StatusOK, api.ChoicesResponse{Choices: choices})
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
