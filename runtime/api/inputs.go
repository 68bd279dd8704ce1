package api

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/gorap/gorap/rap"
)

// User inputs: the user_input gorap extension. A tool asks the user to
// fill in a form of typed fields; clients show it and answer with POST
// /v1/threads/{id}/inputs/{call_id}.

// ErrNoInput is an answer to a user input that is not waiting; the client
// API answers it 404.
var ErrNoInput = errors.New("no user input is waiting for this call")

// Input is a user input waiting for an answer.
type Input struct {
	ThreadID string `json:"thread_id"`
	// CallID is the call that asked.
	CallID   string `json:"call_id"`
	ToolName string `json:"tool_name"`
	// Prompt is the question, for people.
	Prompt string `json:"prompt"`
	// Fields are the values asked for.
	Fields  []rap.InputField `json:"fields"`
	Created time.Time        `json:"created"`
}

// UserInput is the payload of EventUserInput.
type UserInput struct {
	CallID string           `json:"call_id"`
	Name   string           `json:"name"`
	Prompt string           `json:"prompt"`
	Fields []rap.InputField `json:"fields"`
}

// InputAnswered is the payload of EventInputAnswered. The values are not
// in it: they go to the tool only.
type InputAnswered struct {
	CallID    string `json:"call_id"`
	Dismissed bool   `json:"dismissed"`
}

// InputsResponse is the answer of GET /v1/threads/{id}/inputs.
type InputsResponse struct {
	Inputs []Input `json:"inputs"`
}

// AnswerInputRequest is the body of POST
// /v1/threads/{id}/inputs/{call_id}: Values, or Dismiss.
type AnswerInputRequest struct {
	// Values maps field names to JSON values of the fields' types; fields
	// left empty are absent.
	Values  map[string]json.RawMessage `json:"values"`
	Dismiss bool                       `json:"dismiss,omitempty"`
}

// AnswerInputResponse is the answer of POST
// /v1/threads/{id}/inputs/{call_id}: status "sent".
type AnswerInputResponse struct {
	Status    string `json:"status"`
	Dismissed bool   `json:"dismissed"`
}
