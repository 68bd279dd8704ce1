package httpapi

// This file owns the client API's thread routes under /v1 but the event
// stream (events.go): create and list threads, a thread's state, messages,
// history, close and user choices, each a thin layer over the Engine.

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gorap/gorap/runtime/api"
)

func (s *server) serveCreateThread(w http.ResponseWriter, req *http.Request) {
	var body struct {
		// UserID is the session's end user; empty means the runtime's
		// default user.
		UserID string `json:"user_id"`
	}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if user, scoped := api.ScopedUser(req.Context()); scoped {
		if body.UserID != "" && body.UserID != user {
			writeError(w, http.StatusForbidden, fmt.Sprintf("user_id %q: this client's token acts for user %q only; leave user_id out", body.UserID, user))
			return
		}
		body.UserID = user
	}
	resp, err := s.e.CreateSession(req.Context(), body.UserID)
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, resp)
}

// serveListThreads answers GET /v1/threads one page at a time: ?limit=
// (default api.DefaultPageLimit, at most api.MaxPageLimit), ?cursor= (the
// previous page's next_cursor), ?parent_id= (only that thread's children)
// or ?user_id= (only the threads of that user's sessions), ?q= (only the
// threads of sessions whose title or first message holds every word) and
// ?archived= (exclude, include or only; see api.ThreadQuery) (organize.go).
// The answer is {"threads": [...], "next_cursor": "..."}; next_cursor is
// absent on the last page.
func (s *server) serveListThreads(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	limit := api.DefaultPageLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a whole number from 1 to %d", v, api.MaxPageLimit))
			return
		}
		limit = min(n, api.MaxPageLimit)
	}
	page, err := s.findThreads(req, limit)
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	if page.Threads == nil {
		page.Threads = []api.Thread{}
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *server) serveThread(w http.ResponseWriter, req *http.Request) {
	info, err := s.e.ThreadInfo(req.Context(), req.PathValue("id"))
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *server) servePostMessage(w http.ResponseWriter, req *http.Request) {
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
	added, err := s.e.PostMessageWithKey(req.Context(), req.PathValue("id"), *body.Text, req.Header.Get("Idempotency-Key"))
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	status := "queued"
	if !added {
		status = "duplicate"
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": status})
}

func (s *server) serveHistory(w http.ResponseWriter, req *http.Request) {
	msgs, err := s.e.History(req.Context(), req.PathValue("id"))
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	if msgs == nil {
		msgs = []api.Message{}
	}
	resp := api.HistoryResponse{Messages: msgs}
	if c, ok := s.e.(Compactor); ok {
		if resp.Compactions, err = c.Compactions(req.Context(), req.PathValue("id")); err != nil {
			s.writeEngineError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *server) serveClose(w http.ResponseWriter, req *http.Request) {
	var body struct{}
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := s.e.CloseThread(req.Context(), req.PathValue("id")); err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "closed"})
}

func (s *server) serveChoices(w http.ResponseWriter, req *http.Request) {
	choices, err := s.e.PendingChoices(req.Context(), req.PathValue("id"))
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	if choices == nil {
		choices = []api.Choice{}
	}
	writeJSON(w, http.StatusOK, api.ChoicesResponse{Choices: choices})
}

func (s *server) serveAnswerChoice(w http.ResponseWriter, req *http.Request) {
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
	sel, err := s.e.AnswerChoice(req.Context(), req.PathValue("id"), req.PathValue("call_id"), body.Selected)
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "sent", "selected": sel})
}

func (s *server) serveInputs(w http.ResponseWriter, req *http.Request) {
	inputs, err := s.e.PendingInputs(req.Context(), req.PathValue("id"))
	if err != nil {
		s.writeEngineError(w, err)
		return
	}
	if inputs == nil {
		inputs = []api.Input{}
	}
	writeJSON(w, http.StatusOK, api.InputsResponse{Inputs: inputs})
}

func (s *server) serveAnswerInput(w http.ResponseWriter, req *http.Request) {
	var body api.AnswerInputRequest
	if err := readJSON(w, req, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if body.Values == nil && !body.Dismiss {
		writeError(w, http.StatusBadRequest, `send {"values": {"<field>": <value>, ...}} to answer, or {"dismiss": true} to decline`)
		return
	}
	if body.Values != nil && body.Dismiss {
		writeError(w, http.StatusBadRequest, `send either "values" or "dismiss", not both`)
		return
	}
	if err := s.e.AnswerInput(req.Context(), req.PathValue("id"), req.PathValue("call_id"), body.Values, body.Dismiss); err != nil {
		s.writeEngineError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.AnswerInputResponse{Status: "sent", Dismissed: body.Dismiss})
}
