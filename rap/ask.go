package rap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/gorap/gorap/internal/bearer"
)

// pendingAsk is a question to the user (a user choice, a user input) that a
// call's handler waits on, keyed in its Server by the invocation id. A is
// the type of the answer.
type pendingAsk[A any] struct {
	// key authenticates the answer: it is in the question's response_url.
	key string
	// check says why an answer does not fit the question, or nil.
	check  func(A) error
	answer chan A // buffered(1)
}

// question describes one kind of question for ask and answerAsk.
type question[A any] struct {
	// name names the kind in messages: "user choice", "user input".
	name string
	// pending is the Server's table of this kind's open questions.
	pending func(*Server) map[string]*pendingAsk[A]
}

// ask registers a question of kind q for call c, sends the message that
// send builds from its response_url (responsePath under the call's base
// URL, with the question's key), and waits for the answer. answered is
// false when timeout (<= 0: none) passed first; err is set when the call
// already has a question of this kind open, the message cannot be sent, or
// ctx ends first.
func ask[A any](ctx context.Context, c *Call, q question[A], responsePath string, check func(A) error, timeout time.Duration, msg func(responseURL string) Callback) (a A, answered bool, err error) {
	inv := c.Invocation
	var k [16]byte
	_, _ = rand.Read(k[:])
	p := &pendingAsk[A]{key: hex.EncodeToString(k[:]), check: check, answer: make(chan A, 1)}
	s := c.srv
	s.mu.Lock()
	table := q.pending(s)
	if _, busy := table[inv.ID]; busy {
		s.mu.Unlock()
		return a, false, fmt.Errorf("call %s is already waiting for a %s; ask one question at a time", inv.ID, q.name)
	}
	table[inv.ID] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if table[inv.ID] == p {
			delete(table, inv.ID)
		}
		s.mu.Unlock()
	}()

	responseURL := c.baseURL + responsePath + "?" + ChoiceKeyParam + "=" + p.key
	if err := s.sender.Send(withTrace(ctx, c.trace), inv.CallbackURL, msg(responseURL)); err != nil {
		return a, false, fmt.Errorf("call %s: %w", inv.ID, err)
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case a = <-p.answer:
		return a, true, nil
	case <-expired:
		return a, false, nil
	case <-ctx.Done():
		return a, false, fmt.Errorf("call %s: stopped waiting: %w", inv.ID, context.Cause(ctx))
	}
}

// answerAsk hands the answer a, POSTed for invocation id to a question's
// response_url, to the handler waiting on it, and answers the request: 200
// once the answer reached it; 400 for an id with no open question of kind
// q or an answer that does not fit the question (saying why); 401 when
// neither the server's bearer token nor the question's key is right. Each
// question takes one answer: a replay finds nothing (RAP UC-2).
func answerAsk[A any](s *Server, w http.ResponseWriter, r *http.Request, q question[A], id string, a A) {
	unauthorized := q.name + " response not authenticated: POST to the response_url exactly as sent (it carries the key), or send the tool server's bearer token"
	s.mu.Lock()
	p := q.pending(s)[id]
	s.mu.Unlock()
	if p == nil && s.opts.BearerToken != "" && !s.bearerOK(r) {
		// Whether a question is open is the server's state: with a token
		// configured, only an authenticated caller learns it.
		bearer.Challenge(w.Header(), "rap")
		http.Error(w, unauthorized, http.StatusUnauthorized)
		return
	}
	if p == nil {
		http.Error(w, fmt.Sprintf("no %s is pending for id %q: it was already answered, timed out, or never asked", q.name, id), http.StatusBadRequest)
		return
	}
	if !s.bearerOK(r) && !equalSecret(r.URL.Query().Get(ChoiceKeyParam), p.key) {
		bearer.Challenge(w.Header(), "rap")
		http.Error(w, unauthorized, http.StatusUnauthorized)
		return
	}
	if p.check != nil {
		if err := p.check(a); err != nil {
			http.Error(w, fmt.Sprintf("invalid %s response: %v", q.name, err), http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	if table := q.pending(s); table[id] == p {
		delete(table, id)
	} else {
		p = nil
	}
	s.mu.Unlock()
	if p == nil {
		http.Error(w, fmt.Sprintf("no %s is pending for id %q: it was already answered", q.name, id), http.StatusBadRequest)
		return
	}
	p.answer <- a
	w.WriteHeader(http.StatusOK)
}
