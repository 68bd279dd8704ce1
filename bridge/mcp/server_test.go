package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests talk to real MCP servers built with the official Go SDK: over
// Streamable HTTP (an httptest server in this process) and over stdio (this
// test binary, re-executed with envStdioServer set, so that a server can
// really crash).

const envStdioServer = "GORAP_MCP_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envStdioServer) == "1" {
		srv := newTestServer(nil)
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test MCP server:", err)
			os.Exit(1)
		}
		if os.Getenv(envLinger) == "1" {
			select {} // a server that outlives its input
		}
		os.Exit(0)
	}
	if os.Getenv(envBridgeHelper) == "1" {
		runBridgeHelper()
	}
	if dir := os.Getenv(envTaskServer); dir != "" {
		runTaskServer(dir)
		os.Exit(0)
	}
	if dir := os.Getenv(envTaskBridge); dir != "" {
		runTaskBridgeHelper(dir)
	}
	os.Exit(m.Run())
}

// serverHooks lets a test observe the in-process server.
type serverHooks struct {
	mu        sync.Mutex
	cancelled []string // tools whose context the client cancelled
	subs      []string // "+uri" on subscribe, "-uri" on unsubscribe
	counter   atomic.Int64
	started   int // calls of block that began
	release   chan struct{}
}

func (h *serverHooks) noteCancelled(tool string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancelled = append(h.cancelled, tool)
}

func (h *serverHooks) noteSub(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs = append(h.subs, s)
}

func (h *serverHooks) subEvents() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.subs...)
}

func (h *serverHooks) noteStarted() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started++
}

func (h *serverHooks) startedCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started
}

func (h *serverHooks) cancelledTools() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.cancelled...)
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

type progressIn struct {
	Steps int `json:"steps"`
}

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func ptr[T any](v T) *T { return &v }

// newTestServer builds the test MCP server. hooks may be nil (stdio).
func newTestServer(hooks *serverHooks) *sdk.Server {
	var opts *sdk.ServerOptions
	if hooks != nil {
		opts = &sdk.ServerOptions{
			SubscribeHandler: func(ctx context.Context, req *sdk.SubscribeRequest) error {
				hooks.noteSub("+" + req.Params.URI)
				return nil
			},
			UnsubscribeHandler: func(ctx context.Context, req *sdk.UnsubscribeRequest) error {
				hooks.noteSub("-" + req.Params.URI)
				return nil
			},
		}
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "gorap-test", Version: "1"}, opts)
	if hooks != nil {
		s.AddResource(&sdk.Resource{URI: "mem://counter", Name: "counter", MIMEType: "text/plain"},
			func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "mem://counter", MIMEType: "text/plain", Text: fmt.Sprint(hooks.counter.Load())}}}, nil
			})
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Title: "Echo", Description: "Echoes text.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}},
		func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return textResult(in.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds two integers.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true)}},
		func(ctx context.Context, req *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	raw := func(name, desc string, h sdk.ToolHandler) {
		s.AddTool(&sdk.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}, h)
	}
	raw("structured_only", "Structured content without a text copy.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"temperature": 21.5}}, nil
	})
	raw("image", "Returns a tiny image.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a pixel"}, &sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}, nil
	})
	raw("audio", "Returns a tiny audio clip.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{Data: []byte("RIFF1234"), MIMEType: "audio/wav"}}}, nil
	})
	raw("link", "Returns a resource link.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///tmp/report.txt", Name: "report.txt", MIMEType: "text/plain", Size: ptr(int64(42)), Description: "the report"}}}, nil
	})
	raw("embedded", "Returns embedded resources.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://notes", MIMEType: "text/markdown", Text: "# Notes"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://blob", MIMEType: "application/zip", Blob: []byte{1, 2, 3}}},
		}}, nil
	})
	raw("rpc_error", "Answers with a JSON-RPC error.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: "quota exceeded"}
	})
	// Multi round-trip elicitation (MCP 2026-07-28): the first call asks,
	// the retry carries the answer.
	ask := func(name string, schema map[string]any) {
		raw(name, "Asks the user, then says what the answer was.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if resp, ok := req.Params.InputResponses["q"]; ok {
				er, _ := resp.(*sdk.ElicitResult)
				if er == nil {
					return textResult(fmt.Sprintf("unexpected response %T", resp)), nil
				}
				keys := make([]string, 0, len(er.Content))
				for k := range er.Content {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				var parts []string
				for _, k := range keys {
					parts = append(parts, fmt.Sprintf("%s=%v", k, er.Content[k]))
				}
				return textResult(er.Action + " " + strings.Join(parts, " ")), nil
			}
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"q": &sdk.ElicitParams{Message: "Pick, please.", RequestedSchema: schema}}}, nil
		})
	}
	ask("ask_colour", map[string]any{"type": "object", "required": []string{"colour"}, "properties": map[string]any{
		"colour": map[string]any{"type": "string", "title": "Colour", "enum": []string{"red", "green"}},
		"urgent": map[string]any{"type": "boolean", "title": "Urgent"},
	}})
	raw("ask_link", "Asks the user to open a link, then says what the client answered.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if resp, ok := req.Params.InputResponses["u"]; ok {
			er, _ := resp.(*sdk.ElicitResult)
			if er == nil {
				return textResult(fmt.Sprintf("unexpected response %T", resp)), nil
			}
			return textResult("link " + er.Action), nil
		}
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"u": &sdk.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://auth.example.com/authorize?state=s1", ElicitationID: "e1"}}}, nil
	})
	ask("ask_name", map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}})
	raw("ask_model", "Asks the client's model (sampling), then returns its answer.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if resp, ok := req.Params.InputResponses["s"]; ok {
			switch r := resp.(type) {
			case *sdk.CreateMessageResult:
				tc, _ := r.Content.(*sdk.TextContent)
				return textResult(fmt.Sprintf("model %s said %q", r.Model, tc.Text)), nil
			case *sdk.CreateMessageWithToolsResult:
				tc, _ := r.Content[0].(*sdk.TextContent)
				return textResult(fmt.Sprintf("model %s said %q", r.Model, tc.Text)), nil
			default:
				return textResult(fmt.Sprintf("unexpected response %T", resp)), nil
			}
		}
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"s": &sdk.CreateMessageParams{
			SystemPrompt: "Be brief.", MaxTokens: 50,
			Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "Say hi"}}},
		}}}, nil
	})
	raw("fail", "Always reports an error.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "disk full"}}}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "progress", Description: "Reports progress, then finishes."},
		func(ctx context.Context, req *sdk.CallToolRequest, in progressIn) (*sdk.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= in.Steps; i++ {
				if tok != nil {
					if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)}); err != nil {
						return nil, nil, err
					}
				}
			}
			return textResult("done"), nil, nil
		})
	raw("block", "Runs until cancelled.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var release chan struct{}
		hooks.noteStarted()
		if hooks != nil {
			release = hooks.release
		}
		select {
		case <-ctx.Done():
			hooks.noteCancelled("block")
			return nil, ctx.Err()
		case <-release:
			return textResult("released"), nil
		}
	})
	raw("crash", "Kills the server process mid-call.", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if hooks == nil { // only the stdio server may exit
			os.Exit(3)
		}
		return nil, fmt.Errorf("crash is for the stdio server")
	})
	// A tool whose schema RAP refuses (a remote $ref is never fetched):
	// left out and reported, the others still served.
	s.AddTool(&sdk.Tool{Name: "bad_schema", Description: "Has a schema RAP refuses.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/remote.json"}}}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult("unreachable"), nil
		})
	return s
}

// waitFor polls cond until it holds or 30 s pass: MCP servers are
// processes, slow to start on a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
