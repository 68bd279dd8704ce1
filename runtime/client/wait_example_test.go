package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"regexp"
	"strings"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// Send a message and print the answer once it is complete: here the
// model calls a tool that answers asynchronously, then starts a child
// thread whose report it waits for, and SendAndWait returns only when
// the whole session is quiet.
func ExampleClient_SendAndWait() {
	weather := weatherServer()
	defer weather.Close()
	rt := startRuntime(plannerModel{}, "", weather.URL)
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c, err := client.New(rt.URL)
	if err != nil {
		log.Fatal(err)
	}
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		log.Fatal(err)
	}
	info, err := c.SendAndWait(ctx, th.ID, "plan my day", func(ev client.Event) {
		switch p := ev.Payload.(type) {
		case *api.Message:
			if p.Text != "" {
				fmt.Printf("%s: %s\n", p.Role, p.Text)
			}
		case *api.ToolResultEvent:
			fmt.Printf("  %s → %s\n", p.Name, firstLine(p.Text))
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("state:", info.State)
	// Output:
	// user: plan my day
	// assistant: Let me check the weather.
	//   get_weather → sunny, 24 °C
	// assistant: Sunny: I asked a helper to pack.
	//   spawn_thread → Child thread spawned. It runs on its own and reports back; go on with your own work.
	//   receive_event__injected → Final report from child thread:
	// assistant: Packed: sunglasses and water. Have a good day!
	// state: quiet
}

// firstLine is the first line of s, without the thread ids it names.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return idRe.ReplaceAllString(s, "")
}

// weatherServer is a RAP tool server whose get_weather answers after a
// moment, through its callback.
func weatherServer() *httptest.Server {
	s := rap.NewServer("weather", &rap.ServerOptions{Description: "The weather."})
	rap.AddTool(s, &rap.Tool{Name: "get_weather", Description: "Today's weather."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			time.Sleep(50 * time.Millisecond)
			return rap.Text("sunny, 24 °C"), nil
		})
	if err := s.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	return httptest.NewServer(s)
}

var (
	idRe    = regexp.MustCompile(` (with id )?[0-9a-f]{8}-[0-9a-f-]{27}`)
	stackRe = regexp.MustCompile(`Your thread stack, root first: (\[[^\]]*\])`)
	childRe = regexp.MustCompile(`Your thread id is (\S+) and`)
)

// plannerModel checks the weather, has a child thread pack, and sums up.
type plannerModel struct{}

func (plannerModel) Name() string         { return "planner (example)" }
func (plannerModel) SupportsImages() bool { return false }
func (plannerModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	result := ""
	if len(last.ToolResults) > 0 {
		result = last.ToolResults[0].Text
	}
	call := func(name string, args any) model.ToolCall {
		b, _ := json.Marshal(args)
		return model.ToolCall{ID: fmt.Sprintf("c%d", len(req.Messages)), Name: name, Arguments: b}
	}
	var r model.Response
	switch {
	case childRe.MatchString(result):
		id := childRe.FindStringSubmatch(result)[1]
		r.ToolCalls = []model.ToolCall{call("close_thread", map[string]string{"thread_id": id, "report_to_parent": "packed sunglasses and water"})}
	case last.Text == "plan my day":
		r.Text, r.ToolCalls = "Let me check the weather.", []model.ToolCall{call("get_weather", struct{}{})}
	case strings.HasPrefix(result, "sunny"):
		var stack []string
		json.Unmarshal([]byte(stackRe.FindStringSubmatch(req.System)[1]), &stack)
		r.Text, r.ToolCalls = "Sunny: I asked a helper to pack.", []model.ToolCall{call("spawn_thread", map[string]any{"instructions": "Pack for a sunny day.", "child_of": stack})}
	case strings.Contains(result, "packed"):
		r.Text = "Packed: sunglasses and water. Have a good day!"
	}
	if r.Text != "" {
		s.TextDelta(r.Text)
	}
	return &r, nil
}
