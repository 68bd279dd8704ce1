package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// nextChoice waits for the call's next user_choice message.
func nextChoice(t *testing.T, ctx context.Context, c *raptest.Call, seen int) *rap.UserChoice {
	t.Helper()
	var uc *rap.UserChoice
	waitFor(t, "a user_choice", func() bool {
		n := 0
		for _, m := range c.Messages() {
			if u, ok := m.(*rap.UserChoice); ok {
				if n == seen {
					uc = u
					return true
				}
				n++
			}
		}
		return false
	})
	return uc
}

// nextInput waits for the call's user_input message.
func nextInput(t *testing.T, c *raptest.Call) *rap.UserInput {
	t.Helper()
	var ui *rap.UserInput
	waitFor(t, "a user_input", func() bool {
		for _, m := range c.Messages() {
			if u, ok := m.(*rap.UserInput); ok {
				ui = u
				return true
			}
		}
		return false
	})
	return ui
}

// A form elicitation whose fields are an enum and a
// boolean becomes one RAP user_choice per field (RAP UC-1, UC-2); the
// selections return to the MCP server as the elicitation's content.
func TestElicitationAccepted(t *testing.T) {
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "ask_colour", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	uc := nextChoice(t, ctx, c, 0)
	if !slices.Equal(uc.Choices, []string{"red", "green", "Decline"}) || uc.Default != 2 || !strings.Contains(uc.Prompt, "Pick, please.") || !strings.Contains(uc.Prompt, "Colour") {
		t.Fatalf("first user_choice = %+v", uc)
	}
	if err := f.rt.Choose(ctx, uc, 1); err != nil {
		t.Fatal(err)
	}
	uc = nextChoice(t, ctx, c, 1)
	if !slices.Equal(uc.Choices, []string{"Yes", "No", "Decline"}) || !strings.Contains(uc.Prompt, "Urgent") {
		t.Fatalf("second user_choice = %+v", uc)
	}
	if err := f.rt.Choose(ctx, uc, 0); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "accept colour=green urgent=true" {
		t.Errorf("result = %q", res.Text)
	}
}

// Choosing the default ("Decline", what a dismissal
// sends) declines the elicitation, and the result says so.
func TestElicitationDeclined(t *testing.T) {
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "ask_colour", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	uc := nextChoice(t, ctx, c, 0)
	if err := f.rt.Choose(ctx, uc, uc.Default); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "decline") || !strings.Contains(res.Text, "The user declined") {
		t.Errorf("result = %q", res.Text)
	}
}

// A form with a free-text field is declined without
// asking, and the tool result says why.
func TestElicitationRichFormDeclined(t *testing.T) {
	f := startHTTP(t, nil)
	r := f.call(t, "ask_name", map[string]any{})
	if !strings.HasPrefix(r.Text, "decline") || !strings.Contains(r.Text, `free-form string field "name"`) {
		t.Errorf("result = %q", r.Text)
	}
}

// A URL-mode elicitation becomes a RAP oauth message
// carrying the URL (RAP OA-1) before the call's result.
func TestElicitationURL(t *testing.T) {
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "ask_link", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "link accept" {
		t.Errorf("result = %q", res.Text)
	}
	var oauth *rap.OAuth
	for _, m := range c.Messages() {
		if o, ok := m.(*rap.OAuth); ok {
			oauth = o
		}
	}
	if oauth == nil || oauth.AuthURL != "https://auth.example.com/authorize?state=s1" {
		t.Errorf("oauth message = %+v among %d messages", oauth, len(c.Messages()))
	}
}
