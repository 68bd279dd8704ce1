package runtime

// This file owns user inputs, the user_input gorap extension: a tool asks
// the user to fill in a form of typed fields (rap.UserInput). They wait
// in the choices table (store.Choice with Fields), so they are part of the
// thread's state like choices: they survive restarts and move with a
// session. The answer is POSTed to the tool's response_url under the
// same host rule as choices.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Events of user inputs.
const (
	EventUserInput     = api.EventUserInput     // api.UserInput
	EventInputAnswered = api.EventInputAnswered // api.InputAnswered
)

// ErrNoInput is returned (wrapped) by AnswerInput when the thread has no
// user input waiting for that call.
var ErrNoInput = api.ErrNoInput

// runtimeExtensions are the gorap extensions every invocation lists
// (rap.Invocation.Extensions).
var runtimeExtensions = []string{rap.ExtensionUserInput}

// acceptUserInput stores a user_input callback of a pending call and
// announces it; one whose response_url the runtime does not allow ends
// the call with an error result (refuseInteraction).
func (r *Runtime) acceptUserInput(tx store.Tx, call store.Call, m *rap.UserInput) (callbackOutcome, error) {
	if m.ID != call.CallID {
		return callbackOutcome{status: http.StatusForbidden, msg: "id does not match the callback URL"}, nil
	}
	if problem := r.checkResponseURL(call, m.ResponseURL); problem != "" {
		return r.refuseInteraction(tx, call, "response_url "+problem,
			fmt.Sprintf("Error: the tool %s asked the user for input whose answer would go to an address the runtime does not allow, so the form was not shown and this call ended. "+
				"Try again later or use another tool.", call.ToolName))
	}
	if !call.State.Pending() {
		return callbackOutcome{status: http.StatusOK, msg: "ignored: the call is no longer pending"}, nil
	}
	fields, err := json.Marshal(m.Fields)
	if err != nil {
		return callbackOutcome{}, err
	}
	if err := tx.PutChoice(store.Choice{ThreadID: call.ThreadID, CallID: call.CallID, ToolName: call.ToolName,
		Prompt: m.Prompt, ResponseURL: m.ResponseURL, Fields: fields}); err != nil {
		return callbackOutcome{}, err
	}
	out := callbackOutcome{status: http.StatusOK, msg: "accepted: the call stays pending until its tool_result"}
	out.after = func() {
		r.emit(call.ThreadID, EventUserInput, api.UserInput{CallID: call.CallID, Name: call.ToolName, Prompt: m.Prompt, Fields: m.Fields})
	}
	return out, nil
}

// apiInput returns the user input c as the API shows it, without its
// response URL, which may hold a key.
func apiInput(c store.Choice) api.Input {
	var fields []rap.InputField
	_ = json.Unmarshal(c.Fields, &fields) // checked when it arrived
	return api.Input{ThreadID: c.ThreadID, CallID: c.CallID, ToolName: c.ToolName, Prompt: c.Prompt, Fields: fields, Created: c.Created}
}

// inputEvent is the user_input event that asks for in.
func inputEvent(in api.Input) api.UserInput {
	return api.UserInput{CallID: in.CallID, Name: in.ToolName, Prompt: in.Prompt, Fields: in.Fields}
}

// splitAsks separates a thread's waiting user choices from its user
// inputs.
func splitAsks(all []store.Choice) (choices []api.Choice, inputs []api.Input) {
	for _, c := range all {
		if c.Fields != nil {
			inputs = append(inputs, apiInput(c))
		} else {
			choices = append(choices, apiChoice(c))
		}
	}
	return choices, inputs
}

// PendingInputs returns the user inputs of the thread that wait for an
// answer.
func (r *Runtime) PendingInputs(ctx context.Context, threadID string) ([]api.Input, error) {
	var out []api.Input
	err := r.store.View(ctx, func(tx store.Tx) error {
		if _, err := visibleThread(ctx, tx, threadID); err != nil {
			return err
		}
		all, err := tx.ThreadChoices(threadID)
		_, out = splitAsks(all)
		return err
	})
	return out, err
}

// AnswerInput answers the user input of a call: it POSTs {id, values}, or
// {id, dismissed: true} when dismiss is set, to the input's response_url.
// Values are checked against the form first: a missing required field or
// a value of the wrong type is an error wrapping ErrBadInput that names
// the field, and the input stays open. It is answered at most once: a
// second answer gets ErrNoInput. If the tool refuses the answer the input
// stays open and the error wraps ErrChoiceDelivery.
func (r *Runtime) AnswerInput(ctx context.Context, threadID, callID string, values map[string]json.RawMessage, dismiss bool) error {
	if dismiss && len(values) > 0 {
		return fmt.Errorf("%w: send either values or dismiss, not both", ErrBadInput)
	}
	release, err := r.admitInput(threadID)
	if err != nil {
		return err
	}
	var once sync.Once
	done := func() { once.Do(release) }
	defer done()
	var ch store.Choice
	err = r.store.Update(ctx, func(tx store.Tx) error {
		if _, err := visibleThread(ctx, tx, threadID); err != nil {
			return err
		}
		var err error
		ch, err = tx.TakeChoice(threadID, callID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && ch.Fields == nil) {
			// A choice taken here is put back: the error rolls back.
			return fmt.Errorf("%w: thread %s, call %s (it was answered already, or never asked); see GET /v1/threads/%s/inputs", ErrNoInput, threadID, callID, threadID)
		}
		if err != nil {
			return err
		}
		if !dismiss {
			var fields []rap.InputField
			if err := json.Unmarshal(ch.Fields, &fields); err != nil {
				return fmt.Errorf("user input %s of thread %s: stored fields do not read: %w", callID, threadID, err)
			}
			if err := rap.CheckInputValues(fields, values); err != nil {
				return fmt.Errorf("%w: %v; the input is still open", ErrBadInput, err)
			}
		}
		call, err := tx.Call(threadID, callID)
		if err != nil {
			return err
		}
		if problem := r.checkResponseURL(call, ch.ResponseURL); problem != "" {
			r.log.Warn("user input not sent: response_url refused", "thread", threadID, "call_id", callID, "problem", problem)
			return fmt.Errorf("%w: the tool's response_url %s; the input is still open", ErrChoiceDelivery, problem)
		}
		return nil
	})
	done()
	if err != nil {
		return err
	}
	if dismiss {
		values = nil
	}
	// Announced before the POST, as for choices: the tool may send its
	// result before the POST returns.
	r.emit(threadID, EventInputAnswered, api.InputAnswered{CallID: callID, Dismissed: dismiss})
	body, _ := json.Marshal(rap.UserInputResponse{ID: callID, Values: values, Dismissed: dismiss})
	status, err := r.postChoice(ctx, ch.ResponseURL, body)
	// The values are the user's: they are not logged.
	r.log.Info("user input answered", "audit", true, "thread", threadID, "call_id", callID, "fields", len(values),
		"dismissed", dismiss, "status", status, "error", errString(err))
	if err != nil {
		if perr := r.store.Update(ctx, func(tx store.Tx) error { return tx.PutChoice(ch) }); perr != nil {
			r.log.Error("restore user input", "thread", threadID, "call_id", callID, "err", perr)
		} else {
			r.emit(threadID, EventUserInput, inputEvent(apiInput(ch))) // asked again: the answer did not arrive
		}
		return fmt.Errorf("%w: %v; the input is still open, answer again later", ErrChoiceDelivery, err)
	}
	return nil
}

// invalidUserInput is a user_input message that names its call but does
// not decode (an invalid form, say). It is refused with a 400 that says
// why, and the call ends with an error result, so that it does not stay
// pending for an answer that can never come.
type invalidUserInput struct {
	groupID, id string
	problem     error
}

// MessageType implements rap.Callback.
func (*invalidUserInput) MessageType() rap.MessageType { return rap.TypeUserInput }

// Thread implements rap.Callback.
func (m *invalidUserInput) Thread() string { return m.groupID }

// asInvalidUserInput returns the invalidUserInput of a body that failed
// to decode with err, or nil when it is not a user_input naming its
// group_id and id.
func asInvalidUserInput(data []byte, err error) *invalidUserInput {
	var head struct {
		Type    string `json:"type"`
		GroupID string `json:"group_id"`
		ID      string `json:"id"`
	}
	if json.Unmarshal(data, &head) != nil || head.Type != string(rap.TypeUserInput) || head.GroupID == "" || head.ID == "" {
		return nil
	}
	return &invalidUserInput{groupID: head.GroupID, id: head.ID, problem: err}
}

// refuseUserInput ends the call of an invalid user_input.
func (r *Runtime) refuseUserInput(tx store.Tx, call store.Call, m *invalidUserInput) (callbackOutcome, error) {
	if m.id != call.CallID {
		return callbackOutcome{status: http.StatusForbidden, msg: "id does not match the callback URL"}, nil
	}
	return r.refuseInteraction(tx, call, "user_input "+m.problem.Error(),
		fmt.Sprintf("Error: the tool %s asked the user for input with a form the runtime cannot show (%v), so this call ended. "+
			"Try again later or use another tool.", call.ToolName, m.problem))
}
