package rap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
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

// inputQuestion is the kind of question AskInput asks.
var inputQuestion = question[InputAnswer]{
	name:    "user input",
	pending: func(s *Server) map[string]*pendingAsk[InputAnswer] { return s.inputs },
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
	check := func(a InputAnswer) error {
		if a.Dismissed {
			return nil
		}
		return CheckInputValues(fields, a.Values)
	}
	a, answered, err := ask(ctx, c, inputQuestion, UserInputResponsePath, check, timeout, func(responseURL string) Callback {
		return &UserInput{
			GroupID: inv.GroupID, ID: inv.ID, CallID: inv.CallID, Prompt: prompt, Fields: fields,
			ResponseURL: responseURL,
		}
	})
	if err != nil {
		return dismissed, fmt.Errorf("rap: AskInput: %w", err)
	}
	if !answered {
		return dismissed, nil
	}
	return a, nil
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
	answerAsk(s, w, r, inputQuestion, resp.ID, InputAnswer{Values: resp.Values, Dismissed: resp.Dismissed})
}
