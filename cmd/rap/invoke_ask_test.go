package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// formTool serves a tool that asks the user for a form (the user_input
// gorap extension) and returns the values it got, or "dismissed".
func formTool(t *testing.T) string {
	t.Helper()
	s := rap.NewServer("forms", &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	minNights := 1.0
	fields := []rap.InputField{
		{Name: "city", Title: "City", Type: rap.InputString, Required: true},
		{Name: "nights", Type: rap.InputInteger, Minimum: &minNights, Default: json.RawMessage("1")},
		{Name: "pets", Type: rap.InputBoolean},
		{Name: "room", Type: rap.InputEnum, Options: []string{"single", "double"}},
	}
	rap.AddTool(s, &rap.Tool{Name: "book", Description: "asks where to stay", InputSchema: rap.EmptyObjectSchema},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			ans, err := c.AskInput(ctx, "Where to?", fields, 20*time.Second)
			if err != nil {
				return nil, err
			}
			if ans.Dismissed {
				return rap.Text("dismissed"), nil
			}
			var parts []string
			for k, v := range ans.Values {
				parts = append(parts, fmt.Sprintf("%s=%s", k, v))
			}
			sort.Strings(parts)
			return rap.Text(strings.Join(parts, " ")), nil
		})
	return serveToolServer(t, s).URL
}

// resultText returns the text of the tool_result line of rap invoke's
// output, and whether a user_input line came before it.
func resultText(t *testing.T, out string) (text string, sawInput bool) {
	t.Helper()
	for _, m := range jsonLines(t, out) {
		switch m["type"] {
		case "user_input":
			sawInput = true
		case "tool_result":
			text, _ = m["text"].(string)
		}
	}
	return text, sawInput
}

// rap invoke declares the user_input extension, lists the form on
// standard error and answers it from --input flags (fields without one
// take their default); without flags and without a terminal it
// dismisses the form, and so it does when a required field has no value.
func TestInvokeAnswersUserInputFromFlags(t *testing.T) {
	url := formTool(t)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--input", "city=Paris", "--input", "pets=yes", "--input", "room=double"}, `city="Paris" nights=1 pets=true room="double"`},
		{[]string{"--input", "city=Rome", "--input", "nights=3"}, `city="Rome" nights=3`},
		{nil, "dismissed"},
		{[]string{"--input", "nights=2"}, "dismissed"},
		{[]string{"--input", "city=Oslo", "--input", "room=suite"}, `city="Oslo" nights=1`},
	} {
		args := append([]string{"invoke", url, "book"}, tc.flags...)
		code, out, errOut := runVerb(t, invokeContext(t), args...)
		if code != 0 {
			t.Fatalf("%v: status %d, stderr:\n%s", tc.flags, code, errOut)
		}
		got, sawInput := resultText(t, out)
		if got != tc.want || !sawInput {
			t.Errorf("%v: result %q (user_input printed: %v), want %q; stderr:\n%s", tc.flags, got, sawInput, tc.want, errOut)
		}
		if !strings.Contains(errOut, "rap invoke: the tool asks for input: Where to?") || !strings.Contains(errOut, "room (one of single, double)") {
			t.Errorf("%v: the form was not listed on standard error:\n%s", tc.flags, errOut)
		}
	}
	if code, _, errOut := runVerb(t, invokeContext(t), "invoke", url, "book", "--input", "city"); code != exitUsage {
		t.Errorf("--input without =: status %d, want %d; stderr:\n%s", code, exitUsage, errOut)
	}
}

// On a terminal without flags, rap invoke asks for each field in turn
// (an empty line takes the default or leaves the field out, an answer
// that does not fit is asked again) and lists a user_choice's choices and
// reads the pick (RAP UC-1).
func TestInvokeAsksOnTheTerminal(t *testing.T) {
	url := formTool(t)
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, getenv: os.Getenv}
	f := invokeFlags{choose: -1, listen: "127.0.0.1:0"}
	typed := strings.NewReader("Lyon\n0\n\nmaybe\nno\n\n")
	if err := runInvoke(invokeContext(t), a, f, []string{url, "book"}, typed, true); err != nil {
		t.Fatalf("rap invoke: %v; stderr:\n%s", err, errOut.String())
	}
	if got, _ := resultText(t, out.String()); got != `city="Lyon" nights=1 pets=false` {
		t.Errorf("result %q, want city Lyon, nights 1 (the default after 0 was refused), pets false; stderr:\n%s", got, errOut.String())
	}
	if !strings.Contains(errOut.String(), "is below the minimum") || !strings.Contains(errOut.String(), `"maybe" is not true or false`) {
		t.Errorf("the refused answers were not explained:\n%s", errOut.String())
	}

	curl := confirmTool(t)
	out.Reset()
	errOut.Reset()
	if err := runInvoke(invokeContext(t), a, f, []string{curl, "confirm"}, strings.NewReader("1\n"), true); err != nil {
		t.Fatalf("rap invoke: %v; stderr:\n%s", err, errOut.String())
	}
	msgs := jsonLines(t, out.String())
	if last := msgs[len(msgs)-1]; last["text"] != "picked no" {
		t.Errorf("the user picked 1 (no); result %v; stderr:\n%s", last, errOut.String())
	}
	if !strings.Contains(errOut.String(), "  2) later (default)") {
		t.Errorf("the choices were not listed:\n%s", errOut.String())
	}
}
