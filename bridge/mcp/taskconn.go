package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP tasks are not executed by the MCP Go SDK: its
// ClientSession cannot send tools/call with a "task" member, nor
// tasks/get, tasks/result or tasks/cancel, and it drops the server's
// capabilities.tasks and each tool's execution.taskSupport. taskConn is
// the narrow part written by hand: it wraps the sdk.Connection of a stdio
// server and
//
//   - lets the bridge send its own JSON-RPC requests, with string ids
//     "gorap-task-N" (the SDK numbers its requests), and takes their
//     responses off the stream before the SDK sees them;
//   - reads the server's initialize (or server/discover) and tools/list
//     responses as they pass by, to learn whether it supports tasks for
//     tools/call and which tools take them;
//   - takes notifications/tasks/status to the task's poller.
//
// Everything else flows through the SDK untouched.

// taskIDPrefix starts the id of every request the bridge sends itself.
const taskIDPrefix = "gorap-task-"

// maxTaskResponse bounds a response to an injected request; a larger one
// is an error result instead of a result the runtime cannot take.
const maxTaskResponse = 4 << 20

// taskConn is an sdk.Connection with requests of the bridge's own.
type taskConn struct {
	sdk.Connection
	next    atomic.Uint64
	mu      sync.Mutex
	pending map[string]chan *jsonrpc.Response
	sniff   map[string]string // SDK request id -> method, for initialize, server/discover and tools/list
	closed  error             // set when the connection failed
	// supported: the server advertised tasks for tools/call.
	supported atomic.Bool
	// taskTools maps a tool name to its execution.taskSupport.
	taskTools map[string]string
	// status receives notifications/tasks/status params.
	status func(taskInfo)
}

func newTaskConn(c sdk.Connection, status func(taskInfo)) *taskConn {
	return &taskConn{Connection: c, pending: map[string]chan *jsonrpc.Response{}, sniff: map[string]string{},
		taskTools: map[string]string{}, status: status}
}

// Write passes the SDK's messages on, noting the ids of its initialize
// and tools/list requests.
func (t *taskConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Request); ok && r.ID.IsValid() && (r.Method == "initialize" || r.Method == "server/discover" || r.Method == "tools/list") {
		t.mu.Lock()
		t.sniff[fmt.Sprint(r.ID.Raw())] = r.Method
		t.mu.Unlock()
	}
	return t.Connection.Write(ctx, msg)
}

// Read returns the next message for the SDK, keeping the responses to
// the bridge's own requests and the task status notifications.
func (t *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := t.Connection.Read(ctx)
		if err != nil {
			t.fail(err)
			return nil, err
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			key := fmt.Sprint(m.ID.Raw())
			if id, ok := m.ID.Raw().(string); ok && strings.HasPrefix(id, taskIDPrefix) {
				t.mu.Lock()
				ch := t.pending[id]
				delete(t.pending, id)
				t.mu.Unlock()
				if ch != nil {
					ch <- m
				}
				continue
			}
			t.mu.Lock()
			method := t.sniff[key]
			delete(t.sniff, key)
			t.mu.Unlock()
			if method != "" && m.Error == nil {
				t.learn(method, m.Result)
			}
		case *jsonrpc.Request:
			if !m.ID.IsValid() && m.Method == "notifications/tasks/status" {
				var ti taskInfo
				if json.Unmarshal(m.Params, &ti) == nil && ti.TaskID != "" && t.status != nil {
					t.status(ti)
				}
				continue
			}
		}
		return msg, nil
	}
}

// learn reads task support off an initialize or tools/list result.
func (t *taskConn) learn(method string, result json.RawMessage) {
	switch method {
	case "initialize", "server/discover": // both carry capabilities
		var r struct {
			Capabilities struct {
				Tasks *struct {
					Requests *struct {
						Tools *struct {
							Call json.RawMessage `json:"call"`
						} `json:"tools"`
					} `json:"requests"`
				} `json:"tasks"`
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"capabilities"`
		}
		if json.Unmarshal(result, &r) != nil {
			return
		}
		tc := r.Capabilities.Tasks
		ok := tc != nil && tc.Requests != nil && tc.Requests.Tools != nil && len(tc.Requests.Tools.Call) > 0
		if _, ext := r.Capabilities.Extensions[tasksExtension]; ext {
			ok = true
		}
		t.supported.Store(ok)
	case "tools/list":
		var r struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution *struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		}
		if json.Unmarshal(result, &r) != nil {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, tool := range r.Tools {
			if tool.Execution != nil && tool.Execution.TaskSupport != "" {
				t.taskTools[tool.Name] = tool.Execution.TaskSupport
			} else {
				delete(t.taskTools, tool.Name)
			}
		}
	}
}

// tasksExtension is the identifier of the tasks extension that succeeds
// SEP-1686 in protocol versions without capabilities.tasks.
const tasksExtension = "io.modelcontextprotocol/tasks"

// usesTask reports whether a tools/call of tool goes through a task: the
// server supports tasks for tools/call and the tool's taskSupport is
// "optional" or "required" (absent means "forbidden").
func (t *taskConn) usesTask(_ context.Context, tool string) bool {
	if !t.supported.Load() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.taskTools[tool]
	return s == "optional" || s == "required"
}

// fail ends every pending request with err.
func (t *taskConn) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed == nil {
		t.closed = err
	}
	for id, ch := range t.pending {
		close(ch)
		delete(t.pending, id)
	}
}

// errTaskConnClosed: the MCP server's connection ended during a request.
var errTaskConnClosed = errors.New("the connection to the MCP server closed")

// call sends method with params as a request of the bridge's own and
// returns the result, a *jsonrpc.Error the server answered, or an error
// when the connection ends, ctx ends or the response is too large.
func (t *taskConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	id := taskIDPrefix + strconv.FormatUint(t.next.Add(1), 10)
	ch := make(chan *jsonrpc.Response, 1)
	t.mu.Lock()
	if t.closed != nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: %v", errTaskConnClosed, t.closed)
	}
	t.pending[id] = ch
	t.mu.Unlock()
	drop := func() {
		t.mu.Lock()
		delete(t.pending, id)
		t.mu.Unlock()
	}
	if err := t.Connection.Write(ctx, &jsonrpc.Request{ID: jsonrpc2ID(id), Method: method, Params: raw}); err != nil {
		drop()
		return nil, fmt.Errorf("%w: %v", errTaskConnClosed, err)
	}
	select {
	case <-ctx.Done():
		drop()
		return nil, context.Cause(ctx)
	case resp, ok := <-ch:
		if !ok {
			return nil, errTaskConnClosed
		}
		if resp.Error != nil {
			var we *jsonrpc.Error
			if errors.As(resp.Error, &we) {
				return nil, we
			}
			return nil, resp.Error
		}
		if len(resp.Result) > maxTaskResponse {
			return nil, fmt.Errorf("the answer to %s is %d bytes, over the bridge's limit of %d", method, len(resp.Result), maxTaskResponse)
		}
		return resp.Result, nil
	}
}

func jsonrpc2ID(s string) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(s)
	return id
}
