package rap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorap/gorap/internal/bearer"
)

// UserInputResponsePath is where a Server receives the answers to
// Call.AskInput (the response_url of its user_input messages).
const UserInputResponsePath = "/user_input_response"

// ErrInputUnsupported is returned (wrapped) by Call.AskInput when the
// runtime did not list ExtensionUserInput in the invocation.
var ErrInputUnsupported = errors.New("the runtime does not accept user_input (gorap extension): its invocation does not list \"user_input\" in extensions")

// InputAnswer is the answer to Call.AskInput.
type InputAnswer struct {
	// Values maps field names to the JSON values the user entered; fields
	// left empty are absent. Nil when Dismissed.
	Values map[string]json.RawMessage
	// Dismissed says the user declined (or the wait timed out).
	Dismissed bool
}

// pendingInput is an AskInput waiting for its answer.
type pendingInput struct {
	key    string
	fields []InputField
	answer chan InputAnswer // buffered(1)
}

// AskInput asks the user to fill in fields and waits for the answer (the
// user_input gorap extension). It sends a user_input message whose
// response_url is this server's /user_input_response with a per-question
// key, and returns the values the runtime POSTs there, which are checked
// against fields (CheckInputValues).
//
// It returns an error wrapping ErrInputUnsupported, before sending
// anything, when the invocation does not list ExtensionUserInput: a tool
// then falls back to AskUser or to its own defaults. When timeout passes
// first (timeout <= 0 means no timeout) the answer is Dismissed and the
// error nil. When ctx ends first it returns ctx's error. Invalid fields
// (ValidateInputFields) are an error naming the field.
func (c *Call) AskInput(ctx context.Context, prompt string, fields []InputField, timeout time.Duration) (InputAnswer, error) {
	dismissed := InputAnswer{Dismissed: true}
	if err := ValidateInputFields(fields); err != nil {
		return dismissed, fmt.Errorf("rap: AskInput: %w", err)
	}
	if len(prompt) > MaxPromptBytes {
		return dismissed, fmt.Errorf("rap: AskInput: prompt is %d bytes, over the limit of %d; shorten it", len(prompt), MaxPromptBytes)
	}
	inv := c.Invocation
	if !inv.HasExtension(ExtensionUserInput) {
		return dismissed, fmt.Errorf("rap: AskInput for call %s: %w", inv.ID, ErrInputUnsupported)
	}
	if c.sent.Load() {
		return dismissed, c.afterResult("AskInput")
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	p := &pendingInput{key: hex.EncodeToString(k[:]), fields: fields, answer: make(chan InputAnswer, 1)}
	s := c.srv
	s.mu.Lock()
	if _, busy := s.inputs[inv.ID]; busy {
		s.mu.Unlock()
		return dismissed, fmt.Errorf("rap: AskInput: call %s is already waiting for user input; ask one question at a time", inv.ID)
	}
	s.inputs[inv.ID] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.inputs[inv.ID] == p {
			delete(s.inputs, inv.ID)
		}
		s.mu.Unlock()
	}()

	msg := &UserInput{
		GroupID: inv.GroupID, ID: inv.ID, CallID: inv.CallID, Prompt: prompt, Fields: fields,
		ResponseURL: c.baseURL + UserInputResponsePath + "?" + ChoiceKeyParam + "=" + p.key,
	}
	if err := s.sender.Send(ctx, inv.CallbackURL, msg); err != nil {
		return dismissed, fmt.Errorf("rap: AskInput for call %s: %w", inv.ID, err)
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case a := <-p.answer:
		return a, nil
	case <-expired:
		return dismissed, nil
	case <-ctx.Done():
		return dismissed, fmt.Errorf("rap: AskInput for call %s: stopped waiting: %w", inv.ID, context.Cause(ctx))
	}
}

// serveUserInputResponse answers POST /user_input_response: 200 once the
// answer reached the waiting AskInput; 400 for a body that does not
// parse, an id with no pending question or values that do not fit the
// fields (naming the field); 401 when neither the bearer token nor the
// question's key is right.
func (s *Server) serveUserInputResponse(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	resp, err := DecodeUserInputResponse(body)
	if err != nil {
		http.Error(w, "invalid user input response: "+err.Error(), http.StatusBadRequest)
		return
	}
	const unauthorized = "user input response not authenticated: POST to the response_url exactly as sent (it carries the key), or send the tool server's bearer token"
	s.mu.Lock()
	p := s.inputs[resp.ID]
	s.mu.Unlock()
	if p == nil && s.opts.BearerToken != "" && !s.bearerOK(r) {
		bearer.Challenge(w.Header(), "rap")
		http.Error(w, unauthorized, http.StatusUnauthorized)
		return
	}
	if p == nil {
		http.Error(w, fmt.Sprintf("no user input is pending for id %q: it was already answered, timed out, or never asked", resp.ID), http.StatusBadRequest)
		return
	}
	if !s.bearerOK(r) && !equalSecret(r.URL.Query().Get(ChoiceKeyParam), p.key) {
		bearer.Challenge(w.Header(), "rap")
		http.Error(w, unauthorized, http.StatusUnauthorized)
		return
	}
	if !resp.Dismissed {
		if err := CheckInputValues(p.fields, resp.Values); err != nil {
			http.Error(w, "invalid user input response: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	if s.inputs[resp.ID] == p {
		delete(s.inputs, resp.ID) // answered once; a replay finds nothing
	} else {
		p = nil
	}
	s.mu.Unlock()
	if p == nil {
		http.Error(w, fmt.Sprintf("no user input is pending for id %q: it was already answered", resp.ID), http.StatusBadRequest)
		return
	}
	p.answer <- InputAnswer{Values: resp.Values, Dismissed: resp.Dismissed}
	w.WriteHeader(http.StatusOK)
}
