package termchat

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
)

// A tool's form (the user_input gorap extension) is asked field by field,
// one line each: a line that does not fit its field is refused and the
// field asked again, an empty line leaves an optional field empty, an
// enum takes an option's number; the tool gets the typed values. /dismiss
// declines a form. Piped input works line by line.
func TestChatUserInputPiped(t *testing.T) {
	got := make(chan string, 4)
	srv := rap.NewServer("forms", &rap.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rap.AddTool(srv, &rap.Tool{Name: "sign_up", Description: "asks for details"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		a, err := c.AskInput(ctx, "Your details?", []rap.InputField{
			{Name: "email", Title: "Email", Type: rap.InputString, Required: true, Format: rap.FormatEmail},
			{Name: "note", Type: rap.InputString},
			{Name: "weekly", Type: rap.InputBoolean},
			{Name: "topic", Type: rap.InputEnum, Options: []string{"go", "rap"}, Required: true},
		}, 0)
		if err != nil {
			return nil, err
		}
		if a.Dismissed {
			got <- "dismissed"
			return rap.Text("not signed up"), nil
		}
		b, _ := json.Marshal(a.Values)
		got <- string(b)
		return rap.Text("signed up"), nil
	})
	tools := serveToolServer(t, srv).URL
	rt := startTestRuntime(t, scripted.New([]scripted.Turn{
		{When: &scripted.When{UserContains: "sign me up", LastInput: "user"}, ToolCalls: []scripted.Call{{Name: "sign_up", Arguments: json.RawMessage(`{}`)}}, Repeat: true},
		{When: &scripted.When{LastResultContains: "signed up", LastInput: "tool_result"}, Text: "Result: {{last_result}}", Repeat: true},
		{Text: "ok", Repeat: true},
	}), tools)
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "sign me up\nnot-an-email\nada@example.com\n\nmaybe\ny\n2\nsign me up again\n/dismiss\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out, "? sign_up asks: Your details?", "Answer each of its 4 fields on a line of its own",
		"· sign_up's form was answered", "Result: signed up", "· sign_up's form was dismissed", "Result: not signed up")
	for _, want := range []string{`email: "not-an-email" is not an email address`, `"maybe" is not y or n`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	for i, want := range []string{`{"email":"ada@example.com","topic":"rap","weekly":true}`, "dismissed"} {
		select {
		case v := <-got:
			if v != want {
				t.Errorf("answer %d: the tool got %s, want %s", i+1, v, want)
			}
		default:
			t.Fatalf("answer %d did not reach the tool", i+1)
		}
	}
}
