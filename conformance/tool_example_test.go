package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/gorap/gorap/conformance"
	"github.com/gorap/gorap/rap"
)

// Checking a tool server built with gorap's SDK: its read-only tool that
// needs no arguments is called by default; echo is allowed explicitly.
func ExampleToolSuite() {
	ctx := context.Background()
	s := rap.NewServer("demo", nil)
	type echoArgs struct {
		Text string `json:"text"`
	}
	rap.AddTool(s, &rap.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, c *rap.Call, in echoArgs) (*rap.Reply, error) { return rap.Text(in.Text), nil })
	rap.AddTool(s, &rap.Tool{Name: "now", Description: "The time.", Annotations: &rap.Annotations{ReadOnly: true}},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			return rap.Text(time.Now().UTC().Format(time.RFC3339)), nil
		})
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	defer s.Shutdown(ctx)
	srv := httptest.NewServer(s)
	defer srv.Close()

	suite := conformance.ToolSuite(conformance.ToolConfig{
		BaseURL: srv.URL,
		Calls:   map[string]json.RawMessage{"echo": json.RawMessage(`{"text":"hi"}`)},
	})
	rep := suite.Run(ctx, conformance.RunOptions{Subject: srv.URL, Only: []string{"tool.ack", "tool.close"}})
	for _, id := range []string{"tool.ack.status", "tool.ack.before-work", "tool.close.hostile-ids"} {
		res, _ := rep.Result(id)
		fmt.Println(id, res.Status)
	}
	fmt.Println("conforms:", !rep.Failed())
	// Output:
	// tool.ack.status pass
	// tool.ack.before-work pass
	// tool.close.hostile-ids pass
	// conforms: true
}
