package mcpserve

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// subscriptionURI returns the resource a subscription's result links to.
func subscriptionURI(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			return l.URI
		}
	}
	t.Fatalf("the subscription's result links no resource: %q", texts(res))
	return ""
}

// readEvents reads a subscription's resource.
func readEvents(t *testing.T, cs *mcp.ClientSession, uri string) (ended bool, events []event) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Ended  bool    `json:"ended"`
		Events []event `json:"events"`
	}
	if len(res.Contents) != 1 || json.Unmarshal([]byte(res.Contents[0].Text), &body) != nil {
		t.Fatalf("the resource's contents are not the events JSON: %+v", res.Contents)
	}
	return body.Ended, body.Events
}

// A RAP subscription called from MCP returns its confirmation with a link
// to a resource; each event sends a resource update notification to the
// session that subscribed to it, and reading the resource gives the
// events, the final one last.
func TestSubscriptionEventsAsResourceUpdates(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	cs, ev := connect(t, s, nil)
	res := callTool(t, cs, "ticks", map[string]any{"count": 2}, nil)
	if res.IsError {
		t.Fatalf("ticks failed: %q", texts(res))
	}
	uri := subscriptionURI(t, res)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	close(tt.tickGate)
	waitFor(t, 5*time.Second, "three resource updates", func() bool { return len(ev.updates()) >= 3 })
	for _, u := range ev.updates() {
		if u != uri {
			t.Errorf("update for %q, want %q", u, uri)
		}
	}
	ended, events := readEvents(t, cs, uri)
	if !ended || len(events) != 3 || events[0].Text != `{"tick":1}` || !events[2].Final || events[2].Text != `{"tick":"last"}` {
		t.Errorf("the resource says ended %v, events %+v; want ticks 1, 2 and a final one", ended, events)
	}

	// Another session neither sees nor reads it.
	other, _ := connect(t, s, nil)
	list, err := other.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Resources) != 0 {
		t.Errorf("another session lists %d resources, want none of this session's", len(list.Resources))
	}
	if _, err := other.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Error("another session read this session's subscription")
	}
	if err := other.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err == nil {
		t.Error("another session subscribed to this session's subscription")
	}
}

// Unsubscribing from the resource cancels the RAP subscription at the
// tool server (RAP CA-1), and so does the end of the MCP session.
func TestSubscriptionCancelled(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	cs, _ := connect(t, s, nil)
	uri := subscriptionURI(t, callTool(t, cs, "ticks", map[string]any{"count": 0}, nil))
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if cause := receive(t, tt.cancels, 5*time.Second, "the subscription to be cancelled"); cause != rap.ErrCallCancelled.Error() {
		t.Errorf("after unsubscribing the subscription ended with %q, want %q", cause, rap.ErrCallCancelled)
	}

	subscriptionURI(t, callTool(t, cs, "ticks", map[string]any{"count": 0}, nil))
	_ = cs.Close()
	if cause := receive(t, tt.cancels, 5*time.Second, "the subscription to be cancelled"); cause != rap.ErrCallCancelled.Error() && cause != rap.ErrThreadClosed.Error() {
		t.Errorf("after the session ended the subscription ended with %q, want a cancellation", cause)
	}
}
