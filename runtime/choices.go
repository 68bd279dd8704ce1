package runtime

// This file owns user choices (RAP UC-1, UC-2): listing a thread's open
// choices and answering one by POSTing to the tool's response_url (or to
// the runtime's own confirmation, confirm.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// ErrNoChoice is returned (wrapped) by AnswerChoice when the thread has no
// user choice waiting for that call.
var ErrNoChoice = api.ErrNoChoice

// ErrChoiceDelivery is returned (wrapped) by AnswerChoice when the tool
// did not accept the answer; the choice stays open.
var ErrChoiceDelivery = api.ErrChoiceDelivery

// PendingChoices returns the user choices of the thread that wait for an
// answer (RAP UC-1), as the client API shows them.
func (r *Runtime) PendingChoices(ctx context.Context, threadID string) ([]api.Choice, error) {
	var out []api.Choice
	err := r.store.View(ctx, func(tx store.Tx) error {
		if _, err := visibleThread(ctx, tx, threadID); err != nil {
			return err
		}
		all, err := tx.ThreadChoices(threadID)
		out, _ = splitAsks(all) // user inputs are listed by PendingInputs
		return err
	})
	return out, err
}

// AnswerChoice answers the user choice of a call (RAP UC-2): it POSTs
// {id, selected} to the choice's response_url. A nil selected is a
// dismissal and sends the choice's default. The choice is answered at most
// once: a second answer gets ErrNoChoice. If the tool refuses the answer
// the choice stays open and the error wraps ErrChoiceDelivery.
func (r *Runtime) AnswerChoice(ctx context.Context, threadID, callID string, selected *int) (int, error) {
	release, err := r.admitInput(threadID)
	if err != nil {
		return 0, err
	}
	// The gate covers taking the choice, not the POST to the tool: a slow
	// tool must not hold up a move (move_table.go).
	var once sync.Once
	done := func() { once.Do(release) }
	defer done()
	var ch store.Choice
	var confirmCall *store.Call // a runtime confirmation (confirm.go)
	err = r.store.Update(ctx, func(tx store.Tx) error {
		if _, err := visibleThread(ctx, tx, threadID); err != nil {
			return err
		}
		var err error
		ch, err = tx.TakeChoice(threadID, callID)
		if err == nil && ch.Fields != nil {
			// A user input: the error rolls the take back.
			return fmt.Errorf("%w: thread %s, call %s asks for user input, not a choice; answer it with POST /v1/threads/%s/inputs/%s", ErrNoChoice, threadID, callID, threadID, callID)
		}
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: thread %s, call %s (it was answered already, or never asked); see GET /v1/threads/%s/choices", ErrNoChoice, threadID, callID, threadID)
		}
		if err != nil {
			return err
		}
		if selected != nil && (*selected < 0 || *selected >= len(ch.Choices)) {
			return fmt.Errorf("%w: selected is %d; give an index from 0 to %d, or dismiss to send the default", ErrBadInput, *selected, len(ch.Choices)-1)
		}
		// POST only to the tool's own host (checked when
		// the choice arrived too; this covers choices stored before).
		call, err := tx.Call(threadID, callID)
		if err != nil {
			return err
		}
		if ch.ResponseURL == runtimeConfirmURL {
			confirmCall = &call
			return nil
		}
		if problem := r.checkResponseURL(call, ch.ResponseURL); problem != "" {
			r.log.Warn("user choice not sent: response_url refused", "thread", threadID, "call_id", callID, "problem", problem)
			return fmt.Errorf("%w: the tool's response_url %s; the choice is still open", ErrChoiceDelivery, problem)
		}
		return nil
	})
	done()
	if err != nil {
		return 0, err
	}
	sel := ch.Default
	if selected != nil {
		sel = *selected
	}
	if confirmCall != nil {
		r.answerConfirmation(ctx, *confirmCall, sel, selected == nil)
		return sel, nil
	}
	// Announced before the POST: the tool may send its result before the
	// POST returns, and clients should see the answer before the result.
	r.emit(threadID, EventChoiceAnswered, api.ChoiceAnswered{CallID: callID, Selected: sel, Dismissed: selected == nil})
	body, _ := json.Marshal(rap.UserChoiceResponse{ID: callID, Selected: sel})
	status, err := r.postChoice(ctx, ch.ResponseURL, body)
	r.log.Info("user choice answered", "audit", true, "thread", threadID, "call_id", callID, "selected", sel,
		"dismissed", selected == nil, "status", status, "error", errString(err))
	if err != nil {
		// Put it back so the user can answer again.
		if perr := r.store.Update(ctx, func(tx store.Tx) error { return tx.PutChoice(ch) }); perr != nil {
			r.log.Error("restore user choice", "thread", threadID, "call_id", callID, "err", perr)
		} else {
			r.emit(threadID, EventUserChoice, choiceEvent(apiChoice(ch))) // asked again: the answer did not arrive
		}
		return sel, fmt.Errorf("%w: %v; the choice is still open, answer again later", ErrChoiceDelivery, err)
	}
	return sel, nil
}

// postChoice POSTs an answer once. The URL may hold a key: errors name
// only its redacted form.
func (r *Runtime) postChoice(ctx context.Context, url string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("response_url %s is not usable: %v", redact(url), err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s failed", redact(url))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("POST %s: the tool answered %s", redact(url), resp.Status)
	}
	return resp.StatusCode, nil
}

// choiceEvent is the user_choice event that asks for c.
func choiceEvent(c api.Choice) api.UserChoice {
	return api.UserChoice{CallID: c.CallID, Name: c.ToolName, Prompt: c.Prompt, Choices: c.Choices, Default: c.Default}
}
