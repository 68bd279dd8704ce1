package termchat

// User inputs (the user_input gorap extension): a tool asks for a form of
// typed fields. The chat asks each field on a line of its own, in order;
// piped, each input line answers the next field. An empty line leaves an
// optional field empty; /dismiss declines the whole form.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/client"
)

// inputProgress is the answer being typed to the open user input.
type inputProgress struct {
	key    string // askKey of the input
	field  int    // index of the field the next line answers
	values map[string]json.RawMessage
}

// decodeInput reads the data of a user_input event as an open ask.
func decodeInput(data json.RawMessage) (openChoice, bool) {
	var in struct {
		CallID string           `json:"call_id"`
		Name   string           `json:"name"`
		Prompt string           `json:"prompt"`
		Fields []rap.InputField `json:"fields"`
	}
	if json.Unmarshal(data, &in) != nil || in.CallID == "" || rap.ValidateInputFields(in.Fields) != nil {
		return openChoice{}, false
	}
	return openChoice{callID: in.CallID, tool: in.Name, prompt: in.Prompt, fields: in.Fields}, true
}

// userInput shows a tool's form, once per call.
func (t *transcript) userInput(data json.RawMessage) {
	c, ok := decodeInput(data)
	if !ok {
		return
	}
	if _, shown := t.choices[c.callID]; shown {
		return
	}
	t.choices[c.callID] = shownChoice{tool: c.tool}
	lines := strings.Split(shorten(clean(c.prompt), 20, maxPromptChars), "\n")
	t.printf("  ? %s asks: %s\n", toolLabel(c.tool), lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(t.w, "      %s\n", l)
	}
	fmt.Fprintf(t.w, "    Answer each of its %d fields on a line of its own; an empty line leaves an optional field empty, /dismiss declines.\n", len(c.fields))
}

// inputAnswered shows that a user input was answered or dismissed.
func (t *transcript) inputAnswered(data json.RawMessage) {
	var a struct {
		CallID    string `json:"call_id"`
		Dismissed bool   `json:"dismissed"`
	}
	if json.Unmarshal(data, &a) != nil {
		return
	}
	who := "the form of call " + a.CallID
	if c, known := t.choices[a.CallID]; known {
		who = toolLabel(c.tool) + "'s form"
	}
	if a.Dismissed {
		t.printf("  · %s was dismissed\n", who)
		return
	}
	t.printf("  · %s was answered\n", who)
}

// fieldPrompt is the prompt for field f.
func fieldPrompt(f rap.InputField) string {
	label := f.Title
	if label == "" {
		label = f.Name
	}
	label = oneLine(clean(label), 60)
	var hint string
	switch f.Type {
	case rap.InputEnum:
		opts := make([]string, len(f.Options))
		for i, o := range f.Options {
			opts[i] = fmt.Sprintf("%d) %s", i+1, oneLine(clean(o), 40))
		}
		hint = strings.Join(opts, ", ")
	case rap.InputBoolean:
		hint = "y/n"
	case rap.InputString:
		hint = "text"
		if f.Format != "" {
			hint = f.Format
		}
	default:
		hint = string(f.Type)
	}
	if !f.Required {
		hint += ", optional"
	}
	if len(f.Default) > 0 {
		hint += ", default " + oneLine(string(f.Default), 40)
	}
	return fmt.Sprintf("%s (%s)> ", label, hint)
}

// parseFieldValue reads the line typed for field f as its JSON value; nil
// (no error) when the line is empty: the field is left empty, or gets its
// default.
func parseFieldValue(f rap.InputField, text string) (json.RawMessage, error) {
	if text == "" {
		if len(f.Default) > 0 {
			return f.Default, nil
		}
		if f.Required {
			return nil, fmt.Errorf("%s is required", f.Name)
		}
		return nil, nil
	}
	var v json.RawMessage
	switch f.Type {
	case rap.InputBoolean:
		switch strings.ToLower(text) {
		case "y", "yes", "true", "1":
			v = json.RawMessage(`true`)
		case "n", "no", "false", "0":
			v = json.RawMessage(`false`)
		default:
			return nil, fmt.Errorf("%q is not y or n", oneLine(text, 40))
		}
	case rap.InputNumber, rap.InputInteger:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", oneLine(text, 40))
		}
		v, _ = json.Marshal(x)
	case rap.InputEnum:
		if k, err := strconv.Atoi(text); err == nil && k >= 1 && k <= len(f.Options) {
			text = f.Options[k-1]
		}
		v, _ = json.Marshal(text)
	default:
		v, _ = json.Marshal(text)
	}
	if err := f.Check(v); err != nil {
		return nil, fmt.Errorf("%s: %v", f.Name, err)
	}
	return v, nil
}

// inputPromptText is the prompt while user input c is open.
func (s *session) inputPromptText(c openChoice) string {
	p := s.progressFor(c)
	return fieldPrompt(c.fields[p.field])
}

// progressFor returns the answer being typed to c, starting one when c is
// not the input typed so far.
func (s *session) progressFor(c openChoice) *inputProgress {
	key := askKey(c.threadID, c.callID)
	if s.form == nil || s.form.key != key {
		s.form = &inputProgress{key: key, values: map[string]json.RawMessage{}}
	}
	return s.form
}

// answerInputLine takes the line typed for the next field of user input
// c, and sends the answer after the last field. A line that does not fit
// the field asks for it again.
func (s *session) answerInputLine(ctx context.Context, c openChoice, text string) error {
	p := s.progressFor(c)
	f := c.fields[p.field]
	v, err := parseFieldValue(f, text)
	if err != nil {
		s.say(s.f.stderr, "rap chat: %v; type it again\n", err)
		return nil
	}
	if v != nil {
		p.values[f.Name] = v
	}
	if p.field++; p.field < len(c.fields) {
		return nil
	}
	s.form = nil
	return s.sendInput(ctx, c, p.values, false)
}

// dismissInput declines the open user input, if there is one.
func (s *session) dismissInput(ctx context.Context) error {
	c, open := s.f.asks.next()
	if !open || c.fields == nil {
		s.say(s.f.stderr, "rap chat: no form is open; /dismiss declines a tool's form\n")
		return nil
	}
	s.form = nil
	return s.sendInput(ctx, c, nil, true)
}

// sendInput sends the answer to user input c. An answer the runtime
// refuses leaves the input open, to be typed again from its first field.
// A piped session then waits for the thread of the input to settle, as
// for a choice, so that a script's next line follows the tool's result.
func (s *session) sendInput(ctx context.Context, c openChoice, values map[string]json.RawMessage, dismiss bool) error {
	f := s.f
	t := f.followed(c.threadID)
	var before watchState
	if t != nil {
		before = t.watch.snapshot()
	}
	_, asked := f.asks.count()
	err := s.api.AnswerInput(ctx, c.threadID, c.callID, values, dismiss)
	switch {
	case err == nil:
		f.asks.drop(c.threadID, c.callID)
	case StatusOf(err) == http.StatusNotFound:
		f.asks.drop(c.threadID, c.callID)
		s.say(f.stderr, "rap chat: %s's form is no longer open (answered elsewhere, or the tool finished): %v\n", toolLabel(c.tool), err)
		return nil
	case StatusOf(err) == http.StatusUnauthorized || StatusOf(err) == http.StatusForbidden:
		return failure("answer not delivered: %w", err)
	default:
		if _, moved := client.MovedTo(err); moved {
			return s.movedFailure(err)
		}
		s.refusals++
		s.say(f.stderr, "rap chat: answer not delivered: %v; the form stays open, answer it again from its first field\n", err)
		return nil
	}
	if s.opts.Lines != nil || t == nil {
		return nil
	}
	goal := settleGoal{needIdle: true, idlesBefore: before.idles, errsBefore: before.errs, allCalls: true, asks: f.asks, asksBefore: asked}
	if err := waitSettled(ctx, s.api, t.watch, c.threadID, goal, s.opts.Wait); err != nil && ctx.Err() == nil {
		return s.waitFailed(err)
	}
	return nil
}
