package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/wiretest"
)

// printer is a model.Stream that prints text as it streams.
type printer struct{}

func (printer) TextDelta(s string) { fmt.Fprint(os.Stdout, s) }

// A completion against a local server that speaks the Messages API. Against
// the real API, leave BaseURL empty and set ANTHROPIC_API_KEY.
func Example() {
	srv := wiretest.NewAnthropic(wiretest.Replies(wiretest.Reply{Text: "Hello! How can I help?"}))
	defer srv.Close()

	p, err := anthropic.New(&anthropic.Options{
		APIKey:  "test-key",
		BaseURL: srv.URL,
		Model:   "claude-sonnet-4-5",
	})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := p.Complete(context.Background(), model.Request{
		System:   "You are terse.",
		Messages: []model.Message{{Role: model.RoleUser, Text: "Hi"}},
	}, printer{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	fmt.Println(p.Name(), resp.StopReason)
	// Output:
	// Hello! How can I help?
	// anthropic:claude-sonnet-4-5 end_turn
}

// The agent loop: the model calls a tool, the caller runs it and sends the
// result back, and the model answers from it.
func ExampleProvider_Complete_toolUse() {
	srv := wiretest.NewAnthropic(wiretest.CallToolThenAnswer("get_time", json.RawMessage(`{"zone":"UTC"}`)))
	defer srv.Close()
	p, err := anthropic.New(&anthropic.Options{APIKey: "test-key", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	req := model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Text: "What time is it?"}},
		Tools: []model.ToolSpec{{
			Name:        "get_time",
			Description: "Current time in a zone",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}}}`),
		}},
	}
	ctx := context.Background()
	resp, err := p.Complete(ctx, req, nil)
	if err != nil {
		log.Fatal(err)
	}
	call := resp.ToolCalls[0]
	fmt.Println(resp.StopReason, call.Name, string(call.Arguments))

	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: call.ID, Text: "12:00"}}},
	)
	resp, err = p.Complete(ctx, req, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StopReason, resp.Text)
	// Output:
	// tool_use get_time {"zone":"UTC"}
	// end_turn The tool answered: 12:00
}
