package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testTools is a RAP tool server built with the rap SDK, with one tool
// for each behaviour under test, and what its tools saw.
type testTools struct {
	URL       string
	cancelled chan error    // the cause of each "block" call's end
	started   chan struct{} // a "block" call started
	asked     chan int      // the answer each "ask" call got
	signedIn  chan struct{} // closed to let "sign_in" finish
	cancels   chan string   // the cause of each "ticks" subscription's end
	tickGate  chan struct{} // closed to let "ticks" emit its events
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type ticksArgs struct {
	Count int `json:"count" jsonschema:"how many events before the final one"`
}

// startTestTools starts the test tool server on a loopback port.
func startTestTools(t *testing.T) *testTools {
	t.Helper()
	tt := &testTools{
		cancelled: make(chan error, 4), started: make(chan struct{}, 4), asked: make(chan int, 4),
		signedIn: make(chan struct{}), cancels: make(chan string, 4), tickGate: make(chan struct{}),
	}
	s := rap.NewServer("testtools", &rap.ServerOptions{Description: "Tools for mcpserve's tests.", Logger: slog.New(slog.DiscardHandler),
		// The late results of cancelled calls may find the callback
		// listener closed: give up on them quickly at the end of a test.
		Retry: rap.RetryPolicy{Initial: 20 * time.Millisecond, GiveUpAfter: 200 * time.Millisecond}})
	rap.AddTool(s, &rap.Tool{Name: "echo", Description: "Sends back its text.",
		Annotations: &rap.Annotations{ReadOnly: true, Idempotent: true, Custom: map[string]json.RawMessage{annotationTitle: json.RawMessage(`"Echo"`)}}},
		func(ctx context.Context, c *rap.Call, in echoArgs) (*rap.Reply, error) { return rap.Text(in.Text), nil })
	rap.AddTool(s, &rap.Tool{Name: "slow", Description: "Reports half-way progress, then answers about 2 s later."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			if err := c.UpdateView(ctx, "progress", map[string]any{"progress": 1, "total": 2, "message": "half way"}); err != nil {
				return nil, err
			}
			select {
			case <-time.After(2 * time.Second):
				return rap.Text("done slowly"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	rap.AddTool(s, &rap.Tool{Name: "block", Description: "Runs until cancelled."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			tt.started <- struct{}{}
			<-ctx.Done()
			tt.cancelled <- context.Cause(ctx)
			return nil, ctx.Err()
		})
	rap.AddTool(s, &rap.Tool{Name: "ask", Description: "Asks the user to pick a colour."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			i, err := c.AskUser(ctx, "Pick a colour", []string{"red", "green", "blue"}, 0, 20*time.Second)
			if err != nil {
				return nil, err
			}
			tt.asked <- i
			return rap.Text(fmt.Sprintf("picked %d", i)), nil
		})
	rap.AddTool(s, &rap.Tool{Name: "picture", Description: "Returns text and an image."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			return &rap.Reply{Content: []rap.ContentItem{rap.TextContent("a dot"), rap.ImageContent("iVBORw0KGgo=", "image/png")}}, nil
		})
	rap.AddTool(s, &rap.Tool{Name: "fail", Description: "Always fails."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			return nil, errors.New("the disk is full")
		})
	rap.AddTool(s, &rap.Tool{Name: "sign_in", Description: "Needs the user to sign in."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			if err := c.RequestOAuth(ctx, "https://auth.example/authorize?state=xyz"); err != nil {
				return nil, err
			}
			select {
			case <-tt.signedIn:
				return rap.Text("signed in"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	rap.AddSubscription(s, &rap.Tool{Name: "ticks", Description: "Once let, sends count events, then a final one; with count 0, runs until cancelled."},
		func(ctx context.Context, sub *rap.Subscription, in ticksArgs) error {
			if in.Count == 0 {
				<-ctx.Done()
				tt.cancels <- context.Cause(ctx).Error()
				return ctx.Err()
			}
			select {
			case <-tt.tickGate:
			case <-ctx.Done():
				return ctx.Err()
			}
			for i := 1; i <= in.Count; i++ {
				if err := sub.Emit(ctx, fmt.Sprintf(`{"tick":%d}`, i)); err != nil {
					return err
				}
			}
			return sub.Final(ctx, `{"tick":"last"}`, false)
		})
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	})
	tt.URL = srv.URL
	return tt
}

// newTestServer starts an mcpserve Server for the given tool servers.
func newTestServer(t *testing.T, mod func(*Options), urls ...string) *Server {
	t.Helper()
	opts := Options{ServerURLs: urls, Logger: testLogger()}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// testLogger logs to standard error with -v (GORAP_TEST_LOG=1), else
// nowhere.
func testLogger() *slog.Logger {
	if os.Getenv("GORAP_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// clientEvents records what the MCP client received.
type clientEvents struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	updated  []string
	changed  chan struct{}
}

func newClientEvents() *clientEvents { return &clientEvents{changed: make(chan struct{}, 100)} }

func (e *clientEvents) poke() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

func (e *clientEvents) progressMessages() []*mcp.ProgressNotificationParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), e.progress...)
}

func (e *clientEvents) updates() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.updated...)
}

// connect connects an MCP client of the official Go SDK to s over
// in-memory transports; elicit, when not nil, answers elicitations.
func connect(t *testing.T, s *Server, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) (*mcp.ClientSession, *clientEvents) {
	t.Helper()
	ev := newClientEvents()
	opts := &mcp.ClientOptions{
		ElicitationHandler: elicit,
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			ev.mu.Lock()
			ev.progress = append(ev.progress, r.Params)
			ev.mu.Unlock()
			ev.poke()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			ev.mu.Lock()
			ev.updated = append(ev.updated, r.Params.URI)
			ev.mu.Unlock()
			ev.poke()
		},
	}
	if elicit != nil {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpserve-test", Version: "1"}, opts)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCPServer().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs, ev
}

// callTool calls a tool with a deadline and returns its result.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any, progressToken any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

// texts returns the texts of a result's text items.
func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// receive returns the next value of ch, or fails after d.
func receive[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("gave up after %v waiting for %s", d, what)
		panic("unreachable")
	}
}
