package rap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Limits of Call.AskUser.
const (
	// MaxChoices is the most choices one AskUser may offer.
	MaxChoices = 64
	// MaxPromptBytes is the longest AskUser prompt.
	MaxPromptBytes = 8 << 10
)

// ChoiceKeyParam is the query parameter of a user choice's response_url
// that holds the per-choice key. A runtime POSTs to response_url as it is,
// so the key authenticates the answer even without a bearer token.
const ChoiceKeyParam = "key"

// choiceQuestion is the kind of question AskUser asks; the answer is the
// index of the choice picked.
var choiceQuestion = question[int]{
	name:    "user choice",
	pending: func(s *Server) map[string]*pendingAsk[int] { return s.choices },
}

// RequestOAuth asks the runtime to show authURL to the user so that they
// grant the tool access (RAP OA-1). The call stays pending; the handler
// goes on (typically waiting for its own OAuth redirect endpoint to
// receive the code) and returns its result as usual. authURL must be an
// absolute https URL (http is accepted only for loopback hosts, for
// tests). It is never logged.
func (c *Call) RequestOAuth(ctx context.Context, authURL string) error {
	u, err := url.Parse(authURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) {
		return errors.New("rap: RequestOAuth: authURL must be an absolute https URL (RAP OA-1 forbids plain http outside loopback)")
	}
	if c.sent.Load() {
		return c.afterResult("RequestOAuth")
	}
	inv := c.Invocation
	msg := &OAuth{GroupID: inv.GroupID, ID: inv.ID, CallID: inv.CallID, AuthURL: authURL}
	if err := c.srv.sender.Send(withTrace(ctx, c.trace), inv.CallbackURL, msg); err != nil {
		return fmt.Errorf("rap: RequestOAuth for call %s: %w", inv.ID, err)
	}
	return nil
}

func (c *Call) afterResult(what string) error {
	return fmt.Errorf("rap: %s: call %s already has its tool result; nothing more can be sent for it", what, c.Invocation.ID)
}

// AskUser asks the user to pick one of choices and waits for the answer
// (RAP UC-1, UC-2). It sends a user_choice message whose response_url is
// this server's /user_choice_response (under ServerOptions.PublicURL, or
// the base URL the invocation reached) with a per-choice key, and returns
// the index the runtime POSTs there.
//
// When timeout passes first (timeout <= 0 means no timeout) AskUser
// returns def and a nil error, as if the user dismissed the prompt. When
// ctx ends first it returns def and ctx's error. It returns def and an
// error when the arguments are invalid (no choices, more than MaxChoices,
// def out of range) or the message cannot be delivered. The handler then
// goes on and returns its result as usual; lasting decisions ("yes for
// this session") are the tool's to remember (RAP UC-3).
func (c *Call) AskUser(ctx context.Context, prompt string, choices []string, def int, timeout time.Duration) (int, error) {
	switch {
	case len(choices) == 0:
		return def, errors.New("rap: AskUser: choices is empty; offer at least one choice (RAP UC-1)")
	case len(choices) > MaxChoices:
		return def, fmt.Errorf("rap: AskUser: %d choices is over the limit of %d; offer fewer choices", len(choices), MaxChoices)
	case def < 0 || def >= len(choices):
		return def, fmt.Errorf("rap: AskUser: default index %d is out of range for %d choices; pass an index from 0 to %d (RAP UC-1)", def, len(choices), len(choices)-1)
	case len(prompt) > MaxPromptBytes:
		return def, fmt.Errorf("rap: AskUser: prompt is %d bytes, over the limit of %d; shorten it", len(prompt), MaxPromptBytes)
	}
	if c.sent.Load() {
		return def, c.afterResult("AskUser")
	}
	inv := c.Invocation
	check := func(selected int) error {
		if selected >= len(choices) {
			return fmt.Errorf("selected: index %d is out of range; the choice offered %d options (0 to %d)", selected, len(choices), len(choices)-1)
		}
		return nil
	}
	v, answered, err := ask(ctx, c, choiceQuestion, UserChoiceResponsePath, check, timeout, func(responseURL string) Callback {
		return &UserChoice{
			GroupID: inv.GroupID, ID: inv.ID, CallID: inv.CallID,
			Prompt: prompt, Choices: choices, Default: def, ResponseURL: responseURL,
		}
	})
	if err != nil {
		return def, fmt.Errorf("rap: AskUser: %w", err)
	}
	if !answered {
		return def, nil
	}
	return v, nil
}

// UpdateView replaces the content of the view viewType of the call's
// thread (RAP VU-1). content must encode as a JSON object; the runtime
// stores and forwards it without interpreting it. The update is delivered
// in the call's order: after the call's earlier messages, before its
// result.
func (c *Call) UpdateView(ctx context.Context, viewType string, content any) error {
	if viewType == "" {
		return errors.New("rap: UpdateView: viewType is empty; name the view, such as \"diff\"")
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return fmt.Errorf("rap: UpdateView %q: encoding content: %w", viewType, err)
	}
	if jsonKind(raw) != "object" {
		return fmt.Errorf("rap: UpdateView %q: content must encode as a JSON object, got %s (RAP VU-1)", viewType, jsonKind(raw))
	}
	inv := c.Invocation
	msg := &ViewUpdate{GroupID: inv.GroupID, ViewType: viewType, Content: raw}
	if err := c.srv.sender.SendFor(withTrace(ctx, c.trace), inv.CallbackURL, inv.ID, msg); err != nil {
		return fmt.Errorf("rap: UpdateView %q for call %s: %w", viewType, inv.ID, err)
	}
	return nil
}

// serveUserChoiceResponse answers POST /user_choice_response (RAP UC-2):
// 200 once the answer reached the waiting AskUser; 400 for a body that
// does not parse, an id with no pending choice or an index out of range;
// 401 when neither the bearer token nor the choice's key is right.
func (s *Server) serveUserChoiceResponse(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	resp, err := DecodeUserChoiceResponse(body)
	if err != nil {
		http.Error(w, "invalid user choice response: "+err.Error(), http.StatusBadRequest)
		return
	}
	answerAsk(s, w, r, choiceQuestion, resp.ID, resp.Selected)
}
