package main

// This file owns how rap invoke answers what a tool asks the user while
// its call runs: a user_choice (RAP UC-1, UC-2) and a user_input form
// (gorap extension), from flags for scripts or, on a terminal without
// them, by asking on standard error and reading standard input.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// maxAskTries is how often an interactive question is asked again after
// an answer that does not fit, before it is dismissed.
const maxAskTries = 3

// asker answers user_choice and user_input messages.
type asker struct {
	rt       *raptest.Runtime
	choose   int               // --choose; -1: none given
	inputs   map[string]string // --input NAME=VALUE; nil: none given
	in       *bufio.Reader     // standard input, read when terminal
	terminal bool              // standard input is a terminal
	stderr   io.Writer
}

// parseInputFlags turns --input NAME=VALUE flags into a map.
func parseInputFlags(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: --input %q: want NAME=VALUE, such as --input city=Paris", errUsage, f)
		}
		out[name] = value
	}
	return out, nil
}

// interactive reports whether questions are asked on the terminal: stdin
// is one and no flag answers them.
func (a *asker) interactive(flagGiven bool) bool { return a.terminal && !flagGiven && a.in != nil }

// readLine reads one line of the terminal; ok is false at its end.
func (a *asker) readLine() (string, bool) {
	line, err := a.in.ReadString('\n')
	if err != nil && line == "" {
		return "", false
	}
	return strings.TrimSpace(line), true
}

// answerChoice answers a user_choice: with --choose, else on a terminal
// with the user's pick, else with the default, as a dismissal does (RAP
// UC-2).
func (a *asker) answerChoice(ctx context.Context, m *rap.UserChoice) {
	sel := m.Default
	switch {
	case a.choose >= 0:
		sel = a.choose
		if sel >= len(m.Choices) {
			fmt.Fprintf(a.stderr, "rap invoke: --choose %d is out of range for %d choices; sending the default %d\n", a.choose, len(m.Choices), m.Default)
			sel = m.Default
		}
	case a.interactive(false):
		sel = a.pickOnTerminal(m)
	}
	if err := a.rt.Choose(ctx, m, sel); err != nil {
		fmt.Fprintf(a.stderr, "rap invoke: answering the user_choice failed: %v\n", err)
		return
	}
	fmt.Fprintf(a.stderr, "rap invoke: %q: answered %d (%s)\n", m.Prompt, sel, m.Choices[sel])
}

// pickOnTerminal lists the choices and reads the index of one; an empty
// line, the end of input or answers that do not fit give the default.
func (a *asker) pickOnTerminal(m *rap.UserChoice) int {
	fmt.Fprintf(a.stderr, "rap invoke: the tool asks: %s\n", m.Prompt)
	for i, c := range m.Choices {
		mark := ""
		if i == m.Default {
			mark = " (default)"
		}
		fmt.Fprintf(a.stderr, "  %d) %s%s\n", i, c, mark)
	}
	for try := 0; try < maxAskTries; try++ {
		fmt.Fprintf(a.stderr, "choice [%d]: ", m.Default)
		line, ok := a.readLine()
		if !ok || line == "" {
			return m.Default
		}
		if i, err := strconv.Atoi(line); err == nil && i >= 0 && i < len(m.Choices) {
			return i
		}
		fmt.Fprintf(a.stderr, "want a number from 0 to %d\n", len(m.Choices)-1)
	}
	return m.Default
}

// answerInput answers a user_input form: with the --input values (and
// the fields' defaults), else on a terminal with what the user types,
// else dismissed. An answer that misses a required field is dismissed.
func (a *asker) answerInput(ctx context.Context, m *rap.UserInput) {
	describeForm(a.stderr, m)
	var values map[string]json.RawMessage
	switch {
	case a.inputs != nil:
		values = a.valuesFromFlags(m)
	case a.interactive(false):
		values = a.valuesFromTerminal(m)
	default:
		fmt.Fprintln(a.stderr, "rap invoke: no --input values and standard input is not a terminal; dismissing the form")
	}
	if values != nil {
		if missing := missingRequired(m.Fields, values); len(missing) > 0 {
			fmt.Fprintf(a.stderr, "rap invoke: required field(s) %s have no value (give --input NAME=VALUE); dismissing the form\n", strings.Join(missing, ", "))
			values = nil
		}
	}
	var send map[string]any
	if values != nil {
		send = make(map[string]any, len(values))
		for k, v := range values {
			send[k] = v
		}
	}
	if err := a.rt.AnswerInput(ctx, m, send); err != nil {
		fmt.Fprintf(a.stderr, "rap invoke: answering the user_input failed: %v\n", err)
		return
	}
	if send == nil {
		fmt.Fprintf(a.stderr, "rap invoke: %q: dismissed\n", m.Prompt)
		return
	}
	names := make([]string, 0, len(send))
	for k := range send {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(a.stderr, "rap invoke: %q: answered %s\n", m.Prompt, strings.Join(names, ", "))
}

// describeForm lists a form's fields on w.
func describeForm(w io.Writer, m *rap.UserInput) {
	fmt.Fprintf(w, "rap invoke: the tool asks for input: %s\n", m.Prompt)
	for _, f := range m.Fields {
		fmt.Fprintf(w, "  %s\n", fieldSummary(f))
	}
}

// fieldSummary describes a field in one line: name, type, constraints,
// default, title and description.
func fieldSummary(f rap.InputField) string {
	var b strings.Builder
	b.WriteString(f.Name)
	kind := string(f.Type)
	if f.Type == rap.InputEnum {
		kind = "one of " + strings.Join(f.Options, ", ")
	}
	if f.Format != "" {
		kind += ", " + f.Format
	}
	if f.Required {
		kind += ", required"
	}
	fmt.Fprintf(&b, " (%s)", kind)
	if len(f.Default) > 0 {
		fmt.Fprintf(&b, " [default %s]", f.Default)
	}
	if t := strings.TrimSpace(f.Title + " " + f.Description); t != "" {
		fmt.Fprintf(&b, ": %s", t)
	}
	return b.String()
}

// parseFieldValue turns what the user typed into the field's JSON value
// and checks it.
func parseFieldValue(f rap.InputField, s string) (json.RawMessage, error) {
	var v json.RawMessage
	switch f.Type {
	case rap.InputNumber, rap.InputInteger:
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		v = json.RawMessage(s)
	case rap.InputBoolean:
		switch strings.ToLower(s) {
		case "true", "yes", "y", "1":
			v = json.RawMessage("true")
		case "false", "no", "n", "0":
			v = json.RawMessage("false")
		default:
			return nil, fmt.Errorf("%q is not true or false", s)
		}
	default:
		v, _ = json.Marshal(s)
	}
	if err := f.Check(v); err != nil {
		return nil, err
	}
	return v, nil
}

// valuesFromFlags takes the --input values of the form's fields, and the
// defaults of the others; values that do not fit are reported and left
// out, as are flags that name no field.
func (a *asker) valuesFromFlags(m *rap.UserInput) map[string]json.RawMessage {
	values := map[string]json.RawMessage{}
	known := map[string]bool{}
	for _, f := range m.Fields {
		known[f.Name] = true
		s, given := a.inputs[f.Name]
		switch {
		case given:
			v, err := parseFieldValue(f, s)
			if err != nil {
				fmt.Fprintf(a.stderr, "rap invoke: --input %s: %v; leaving it out\n", f.Name, err)
				continue
			}
			values[f.Name] = v
		case len(f.Default) > 0:
			values[f.Name] = f.Default
		}
	}
	for name := range a.inputs {
		if !known[name] {
			fmt.Fprintf(a.stderr, "rap invoke: --input %s names no field of this form; ignoring it\n", name)
		}
	}
	return values
}

// valuesFromTerminal asks for each field in turn. An empty line takes
// the default, or leaves an optional field out; the end of input
// dismisses the form.
func (a *asker) valuesFromTerminal(m *rap.UserInput) map[string]json.RawMessage {
	values := map[string]json.RawMessage{}
	for _, f := range m.Fields {
		for try := 0; ; try++ {
			if try == maxAskTries {
				fmt.Fprintf(a.stderr, "rap invoke: no valid value for %s; dismissing the form\n", f.Name)
				return nil
			}
			hint := ""
			if len(f.Default) > 0 {
				hint = fmt.Sprintf(" [%s]", f.Default)
			}
			fmt.Fprintf(a.stderr, "%s%s: ", f.Name, hint)
			line, ok := a.readLine()
			if !ok {
				return nil
			}
			if line == "" {
				if len(f.Default) > 0 {
					values[f.Name] = f.Default
					break
				}
				if !f.Required {
					break
				}
				fmt.Fprintf(a.stderr, "%s is required\n", f.Name)
				continue
			}
			v, err := parseFieldValue(f, line)
			if err != nil {
				fmt.Fprintf(a.stderr, "%s: %v\n", f.Name, err)
				continue
			}
			values[f.Name] = v
			break
		}
	}
	return values
}

// missingRequired returns the required fields without a value.
func missingRequired(fields []rap.InputField, values map[string]json.RawMessage) []string {
	var out []string
	for _, f := range fields {
		if _, ok := values[f.Name]; f.Required && !ok {
			out = append(out, f.Name)
		}
	}
	return out
}
