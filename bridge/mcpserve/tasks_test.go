package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawClient speaks JSON-RPC to the MCP server directly: the Go SDK's
// client has no tasks API.
type rawClient struct {
	t      *testing.T
	conn   mcp.Connection
	nextID atomic.Int64

	mu      sync.Mutex
	waiting map[int64]chan *jsonrpc.Response
	// onRequest answers a request the server sends (elicitation).
	onRequest func(*jsonrpc.Request) (any, error)
}

// connectRaw connects a rawClient to s over in-memory transports and
// initializes the session at version, advertising form elicitation.
func connectRaw(t *testing.T, s *Server, version string, onRequest func(*jsonrpc.Request) (any, error)) (*rawClient, map[string]any) {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCPServer().Connect(ctx, TaskTransport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, conn: conn, waiting: map[int64]chan *jsonrpc.Response{}, onRequest: onRequest}
	go c.readLoop()
	t.Cleanup(func() {
		_ = conn.Close()
		_ = ss.Wait()
	})
	var init map[string]any
	c.call("initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		"clientInfo":      map[string]any{"name": "raw", "version": "1"},
	}, &init)
	c.notify("notifications/initialized", map[string]any{})
	return c, init
}

func (c *rawClient) readLoop() {
	for {
		msg, err := c.conn.Read(context.Background())
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			id, _ := m.ID.Raw().(int64)
			c.mu.Lock()
			ch := c.waiting[id]
			delete(c.waiting, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case *jsonrpc.Request:
			if !m.IsCall() {
				continue
			}
			go func() {
				resp := &jsonrpc.Response{ID: m.ID}
				if c.onRequest == nil {
					resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no handler"}
				} else if res, err := c.onRequest(m); err != nil {
					resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
				} else {
					resp.Result, _ = json.Marshal(res)
				}
				_ = c.conn.Write(context.Background(), resp)
			}()
		}
	}
}

// request sends a request and returns its response, failing after 10 s.
func (c *rawClient) request(method string, params any) *jsonrpc.Response {
	c.t.Helper()
	n := c.nextID.Add(1)
	id, _ := jsonrpc.MakeID(float64(n))
	raw, _ := json.Marshal(params)
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	c.waiting[n] = ch
	c.mu.Unlock()
	if err := c.conn.Write(context.Background(), &jsonrpc.Request{ID: id, Method: method, Params: raw}); err != nil {
		c.t.Fatalf("sending %s: %v", method, err)
	}
	return receive(c.t, ch, 10*time.Second, "the response to "+method)
}

// call sends a request, fails on an error response and decodes the
// result into out.
func (c *rawClient) call(method string, params, out any) {
	c.t.Helper()
	resp := c.request(method, params)
	if resp.Error != nil {
		c.t.Fatalf("%s: %v", method, resp.Error)
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		c.t.Fatalf("%s: decoding %s: %v", method, resp.Result, err)
	}
}

// callError sends a request that must fail and returns its error.
func (c *rawClient) callError(method string, params any) *jsonrpc.Error {
	c.t.Helper()
	resp := c.request(method, params)
	var we *jsonrpc.Error
	if resp.Error == nil || !errors.As(resp.Error, &we) {
		c.t.Fatalf("%s succeeded (%s), want an error", method, resp.Result)
	}
	return we
}

func (c *rawClient) notify(method string, params any) {
	raw, _ := json.Marshal(params)
	_ = c.conn.Write(context.Background(), &jsonrpc.Request{Method: method, Params: raw})
}

type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	TTL           int64  `json:"ttl"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	PollInterval  int64  `json:"pollInterval"`
	StatusMessage string `json:"statusMessage"`
}

type wireToolResult struct {
	Meta    map[string]json.RawMessage `json:"_meta"`
	IsError bool                       `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// startTask calls a tool as a task and returns the task created.
func (c *rawClient) startTask(tool string, ttlMillis int) wireTask {
	c.t.Helper()
	var created struct {
		Task wireTask `json:"task"`
	}
	c.call("tools/call", map[string]any{"name": tool, "arguments": map[string]any{}, "task": map[string]any{"ttl": ttlMillis}}, &created)
	if created.Task.TaskID == "" {
		c.t.Fatalf("tools/call of %s as a task returned no task", tool)
	}
	return created.Task
}

func (c *rawClient) getTask(id string) wireTask {
	c.t.Helper()
	var got wireTask
	c.call("tasks/get", map[string]any{"taskId": id}, &got)
	return got
}

// A 2025-11-25 session is told of the tasks capability and that every
// tool may run as a task; a task-augmented call returns a working task at
// once, tasks/get reports the tool's view_update progress, tasks/result
// waits for the tool's result and ties it to the task, and tasks/list
// lists it.
func TestTaskAugmentedCallReturnsATaskWhoseResultArrivesLater(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	c, init := connectRaw(t, s, "2025-11-25", nil)

	caps, _ := init["capabilities"].(map[string]any)
	tasks, _ := caps["tasks"].(map[string]any)
	requests, _ := tasks["requests"].(map[string]any)
	toolsReq, _ := requests["tools"].(map[string]any)
	if tasks["list"] == nil || tasks["cancel"] == nil || toolsReq["call"] == nil {
		t.Fatalf("initialize capabilities.tasks = %v, want list, cancel and requests.tools.call", caps["tasks"])
	}
	var list struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	c.call("tools/list", map[string]any{}, &list)
	for _, tool := range list.Tools {
		if tool.Execution.TaskSupport != "optional" {
			t.Errorf("tool %s has execution.taskSupport %q, want optional", tool.Name, tool.Execution.TaskSupport)
		}
	}

	task := c.startTask("slow", 120000)
	if task.Status != taskWorking || task.TTL != 120000 || task.CreatedAt == "" || task.PollInterval <= 0 {
		t.Errorf("created task = %+v, want working with ttl 120000, createdAt and pollInterval", task)
	}
	waitFor(t, 5*time.Second, "tasks/get to report the tool's progress", func() bool {
		got := c.getTask(task.TaskID)
		return strings.Contains(got.StatusMessage, "half way") || got.Status == taskCompleted
	})
	var res wireToolResult
	c.call("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
	if res.IsError || len(res.Content) != 1 || res.Content[0].Text != "done slowly" {
		t.Errorf("tasks/result = %+v, want the tool's text", res)
	}
	if !strings.Contains(string(res.Meta[relatedTaskKey]), task.TaskID) {
		t.Errorf("tasks/result _meta = %v, want %s naming the task", res.Meta, relatedTaskKey)
	}
	if got := c.getTask(task.TaskID); got.Status != taskCompleted {
		t.Errorf("after its result the task is %q, want completed", got.Status)
	}
	var listed struct {
		Tasks []wireTask `json:"tasks"`
	}
	c.call("tasks/list", map[string]any{}, &listed)
	if len(listed.Tasks) != 1 || listed.Tasks[0].TaskID != task.TaskID {
		t.Errorf("tasks/list = %+v, want the one task", listed.Tasks)
	}
	if e := c.callError("tasks/get", map[string]any{"taskId": "nope"}); e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("tasks/get of an unknown task: code %d, want %d", e.Code, jsonrpc.CodeInvalidParams)
	}
}

// tasks/cancel ends a running task: the tool gets /cancel_tool_call (RAP
// CA-1) and the task is cancelled; cancelling it again is an error.
func TestTaskCancelSendsCancelToolCall(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	c, _ := connectRaw(t, s, "2025-11-25", nil)
	task := c.startTask("block", 60000)
	receive(t, tt.started, 5*time.Second, "the tool to start")
	var got wireTask
	c.call("tasks/cancel", map[string]any{"taskId": task.TaskID}, &got)
	if got.Status != taskCancelled {
		t.Errorf("tasks/cancel answered status %q, want cancelled", got.Status)
	}
	if cause := receive(t, tt.cancelled, 5*time.Second, "the tool to be cancelled"); !errors.Is(cause, rap.ErrCallCancelled) {
		t.Errorf("the tool ended with %v, want rap.ErrCallCancelled (RAP CA-1)", cause)
	}
	if e := c.callError("tasks/cancel", map[string]any{"taskId": task.TaskID}); e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("cancelling an ended task: code %d, want %d", e.Code, jsonrpc.CodeInvalidParams)
	}
	if e := c.callError("tasks/result", map[string]any{"taskId": task.TaskID}); !strings.Contains(e.Message, "cancelled") {
		t.Errorf("tasks/result of a cancelled task: %q, want an error saying it was cancelled", e.Message)
	}
}

// A user_choice asked during a task is a form elicitation tied to the
// task, which is input_required until the user answers (RAP UC-1); a tool
// error makes the task failed.
func TestTaskAsksTheUserThroughElicitation(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	answer := make(chan string, 1)
	var sawTask atomic.Value
	var c *rawClient
	c, _ = connectRaw(t, s, "2025-11-25", func(r *jsonrpc.Request) (any, error) {
		if r.Method != "elicitation/create" {
			return nil, fmt.Errorf("unexpected %s", r.Method)
		}
		var p struct {
			Meta map[string]struct {
				TaskID string `json:"taskId"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(r.Params, &p)
		sawTask.Store(p.Meta[relatedTaskKey].TaskID)
		return map[string]any{"action": "accept", "content": map[string]any{choiceField: <-answer}}, nil
	})
	task := c.startTask("ask", 60000)
	waitFor(t, 5*time.Second, "the task to wait for the user", func() bool { return c.getTask(task.TaskID).Status == taskInputRequired })
	answer <- "green"
	var res wireToolResult
	c.call("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
	if len(res.Content) != 1 || res.Content[0].Text != "picked 1" {
		t.Errorf("tasks/result = %+v, want picked 1", res)
	}
	if got, _ := sawTask.Load().(string); got != task.TaskID {
		t.Errorf("the elicitation named task %q, want %q", got, task.TaskID)
	}
	if got := receive(t, tt.asked, 5*time.Second, "the tool's answer"); got != 1 {
		t.Errorf("the tool got choice %d, want 1", got)
	}

	failed := c.startTask("fail", 60000)
	c.call("tasks/result", map[string]any{"taskId": failed.TaskID}, &res)
	if !res.IsError {
		t.Errorf("tasks/result of a failing tool = %+v, want isError", res)
	}
	if got := c.getTask(failed.TaskID); got.Status != taskFailed {
		t.Errorf("a tool error leaves the task %q, want failed", got.Status)
	}
}

// Before 2025-11-25 there are no tasks: no capability, and a tools/call
// with a task param is an ordinary call.
func TestOlderSessionsHaveNoTasks(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	c, init := connectRaw(t, s, "2025-06-18", nil)
	if caps, _ := init["capabilities"].(map[string]any); caps["tasks"] != nil {
		t.Errorf("a 2025-06-18 session was offered tasks: %v", caps["tasks"])
	}
	var res wireToolResult
	c.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}, "task": map[string]any{}}, &res)
	if len(res.Content) != 1 || res.Content[0].Text != "hi" {
		t.Errorf("tools/call = %+v, want the echo", res)
	}
}

func TestLiftTaskParamKeepsOtherParams(t *testing.T) {
	in := `{"name":"x","arguments":{"a":1},"_meta":{"progressToken":7},"task":{"ttl":5}}`
	var m struct {
		Name string                     `json:"name"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(liftTaskParam(json.RawMessage(in)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Name != "x" || string(m.Meta["progressToken"]) != "7" || string(m.Meta[taskMetaKey]) != `{"ttl":5}` {
		t.Errorf("lifted = %+v", m)
	}
	body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + in + `},{"jsonrpc":"2.0","id":2,"method":"ping"}]`
	if out := string(liftTaskParamsInBody([]byte(body))); !strings.Contains(out, taskMetaKey) || !strings.Contains(out, `"ping"`) {
		t.Errorf("lifted batch = %s", out)
	}
}

// A client that prefers 2026-07-28 (the Go SDK's does) is answered with
// 2025-11-25, the newest version in which the server may elicit while a
// call runs and in which tasks are part of the core protocol.
func TestNewestProtocolVersionIs20251125(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	cs, _ := connect(t, s, nil)
	if got := cs.InitializeResult().ProtocolVersion; got != tasksProtocolVersion {
		t.Errorf("negotiated %s, want %s", got, tasksProtocolVersion)
	}
}
