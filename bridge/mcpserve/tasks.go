package mcpserve

// This file owns MCP tasks (protocol version 2025-11-25, "tasks"): a
// tools/call the client augments with a task returns a task at once, the
// RAP invocation runs on, and the client polls it with tasks/get, fetches
// its result with tasks/result, lists the session's tasks with tasks/list
// and cancels one with tasks/cancel (RAP /cancel_tool_call).
//
// The MCP Go SDK (v1.8.0) knows nothing of tasks, so the pieces it lacks
// are added around it without forking it:
//   - tasks/get, tasks/result, tasks/list and tasks/cancel are custom
//     methods (mcp.AddReceivingCustomMethod);
//   - a receiving middleware adds the tasks capability to the initialize
//     result and execution.taskSupport to every listed tool, and turns a
//     task-augmented tools/call into a task;
//   - the SDK decodes tools/call params into a struct without "task", so
//     the transports (taskTransport, and HTTPHandler for Streamable HTTP)
//     copy params.task into params._meta under taskMetaKey before the SDK
//     decodes the request, where the middleware finds it.
//
// Tasks are kept in memory, per MCP session, at most MaxTasksPerSession,
// each until its ttl has passed (and at least a minute after it ended);
// they end with the session.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of tasks.
const (
	// MaxTasksPerSession bounds the tasks one MCP session holds, running
	// and ended: a task-augmented call beyond it first evicts the oldest
	// ended task, and is refused when every task still runs.
	MaxTasksPerSession = 64
	// DefaultTaskTTL is how long a task is kept, counted from its
	// creation, when the client asks for no ttl.
	DefaultTaskTTL = 30 * time.Minute
	// MinTaskTTL and MaxTaskTTL bound the ttl a client asks for.
	MinTaskTTL = time.Minute
	MaxTaskTTL = 24 * time.Hour
	// taskKeepAfterEnd is how long an ended task is kept at least, even
	// when its ttl has passed, so that a client polling it sees its end.
	taskKeepAfterEnd = time.Minute
	// taskPollInterval is the poll interval suggested to clients.
	taskPollInterval = time.Second
)

// tasksProtocolVersion is the MCP version that has tasks in its core:
// 2026-07-28 moved them to an extension of another shape (SEP-2663).
const tasksProtocolVersion = "2025-11-25"

// taskMetaKey is the _meta key under which the transports hand a
// tools/call's "task" param to the middleware.
const taskMetaKey = "io.gorap.mcpserve/task"

// relatedTaskKey is the _meta key that ties a message to a task (MCP
// tasks, "Associating Task-Related Messages").
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// Task statuses (MCP tasks).
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// taskInfo is the wire form of an MCP task.
type taskInfo struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	TTL           int64  `json:"ttl"` // milliseconds
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
	StatusMessage string `json:"statusMessage,omitempty"`
}

// createTaskResult answers a task-augmented tools/call.
type createTaskResult struct {
	mcp.ResultBase
	Task taskInfo `json:"task"`
}

// taskResult answers tasks/get and tasks/cancel: the task's fields.
type taskResult struct {
	mcp.ResultBase
	taskInfo
}

// listTasksResult answers tasks/list.
type listTasksResult struct {
	mcp.ResultBase
	Tasks      []taskInfo `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// taskIDParams are the params of tasks/get, tasks/result, tasks/cancel.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// listTasksParams are the params of tasks/list.
type listTasksParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// task is one task-augmented call.
type task struct {
	id      string
	created time.Time
	ttl     time.Duration
	cancel  context.CancelFunc
	done    chan struct{} // closed when the task ends

	mu      sync.Mutex
	status  string
	message string
	updated time.Time
	ended   time.Time
	result  *mcp.CallToolResult // when completed or failed
}

// info returns the task's wire form.
func (t *task) info() taskInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return taskInfo{
		TaskID: t.id, Status: t.status, TTL: t.ttl.Milliseconds(),
		CreatedAt: t.created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		PollInterval: taskPollInterval.Milliseconds(), StatusMessage: t.message,
	}
}

// terminal reports whether the task status is final.
func terminal(status string) bool {
	return status == taskCompleted || status == taskFailed || status == taskCancelled
}

// setStatus moves a running task to status (working or input_required)
// with message; "" keeps the message. An ended task keeps its status.
func (t *task) setStatus(status, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if terminal(t.status) {
		return
	}
	t.status = status
	if message != "" {
		t.message = message
	}
	t.updated = time.Now()
}

// finish ends the task with status and, unless cancelled, its result.
func (t *task) finish(status string, res *mcp.CallToolResult, message string) {
	t.mu.Lock()
	if terminal(t.status) {
		t.mu.Unlock()
		return
	}
	t.status, t.result = status, res
	if message != "" {
		t.message = message
	}
	t.updated = time.Now()
	t.ended = t.updated
	t.mu.Unlock()
	close(t.done)
}

// expired reports whether an ended task may be forgotten at now.
func (t *task) expired(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.ended.IsZero() && now.After(t.created.Add(t.ttl)) && now.After(t.ended.Add(taskKeepAfterEnd))
}

// taskStore holds the tasks of every MCP session.
type taskStore struct {
	s        *Server
	mu       sync.Mutex
	sessions map[*mcp.ServerSession]map[string]*task
}

func newTaskStore(s *Server) *taskStore {
	return &taskStore{s: s, sessions: map[*mcp.ServerSession]map[string]*task{}}
}

// register adds the tasks methods and middleware to srv.
func (ts *taskStore) register(srv *mcp.Server) {
	srv.AddReceivingMiddleware(ts.middleware)
	must(mcp.AddReceivingCustomMethod(srv, "tasks/get", ts.get))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/result", ts.result))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/list", ts.list))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/cancel", ts.cancelTask))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// sessionSupportsTasks reports whether the session speaks the protocol
// version that has tasks.
func sessionSupportsTasks(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.ProtocolVersion == tasksProtocolVersion
}

// middleware adds the tasks capability and tool execution hints, and
// runs task-augmented tools/call requests as tasks.
func (ts *taskStore) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil && ir.ProtocolVersion == tasksProtocolVersion {
				return &initializeWithTasks{ir}, nil
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && sessionSupportsTasks(sessionOf(req)) {
				return &toolsWithTaskSupport{lr}, nil
			}
			return res, err
		case "tools/call":
			if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
				if spec, asked := cr.Params.Meta[taskMetaKey]; asked {
					delete(cr.Params.Meta, taskMetaKey)
					if sessionSupportsTasks(cr.Session) {
						if e := ts.s.tool(cr.Params.Name); e != nil {
							return ts.start(cr, e, spec)
						}
					}
				}
			}
		}
		return next(ctx, method, req)
	}
}

func sessionOf(req mcp.Request) *mcp.ServerSession {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return ss
}

// start creates a task for a call and runs the call in the background.
func (ts *taskStore) start(req *mcp.CallToolRequest, e *exposedTool, spec any) (mcp.Result, error) {
	ttl := DefaultTaskTTL
	if m, ok := spec.(map[string]any); ok {
		if ms, ok := m["ttl"].(float64); ok && ms > 0 {
			ttl = min(max(time.Duration(ms)*time.Millisecond, MinTaskTTL), MaxTaskTTL)
		}
	}
	// The call outlives the tools/call request: its context is the
	// task's, not the request's (whose stream ends with the response).
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now()
	t := &task{id: randomHex(16), created: now, updated: now, ttl: ttl, cancel: cancel, done: make(chan struct{}), status: taskWorking}
	if err := ts.add(req.Session, t); err != nil {
		cancel()
		return nil, err
	}
	ts.s.mu.Lock()
	closed := ts.s.closed
	if !closed {
		ts.s.wg.Add(1)
	}
	ts.s.mu.Unlock()
	if closed {
		cancel()
		t.finish(taskCancelled, nil, "the MCP server is shutting down")
		return &createTaskResult{Task: t.info()}, nil
	}
	go func() {
		defer ts.s.wg.Done()
		defer cancel()
		res, err := ts.s.runCall(ctx, req, e, t)
		switch {
		case err != nil:
			t.finish(taskCancelled, nil, "cancelled: the RAP tool was sent /cancel_tool_call")
		case res.IsError:
			t.finish(taskFailed, res, firstText(res))
		default:
			t.finish(taskCompleted, res, "")
		}
	}()
	return &createTaskResult{Task: t.info()}, nil
}

// add stores t in the session's tasks, forgetting expired ones and, when
// full, the oldest ended one.
func (ts *taskStore) add(ss *mcp.ServerSession, t *task) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	m := ts.sessions[ss]
	if m == nil {
		m = map[string]*task{}
		ts.sessions[ss] = m
	}
	now := time.Now()
	var oldest *task
	for id, old := range m {
		if old.expired(now) {
			delete(m, id)
			continue
		}
		select {
		case <-old.done:
			if oldest == nil || old.created.Before(oldest.created) {
				oldest = old
			}
		default:
		}
	}
	if len(m) >= MaxTasksPerSession {
		if oldest == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"this MCP session already runs %d tasks, the most it may: wait for one to end or cancel one (tasks/cancel), then call again", MaxTasksPerSession)}
		}
		delete(m, oldest.id)
	}
	m[t.id] = t
	return nil
}

// lookup returns the task of p in the session, or an invalid-params
// error.
func (ts *taskStore) lookup(ss *mcp.ServerSession, p *taskIDParams) (*task, error) {
	if p == nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "taskId is missing: give the taskId of the task"}
	}
	id := p.TaskID
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.sessions[ss][id]
	if !ok || t.expired(time.Now()) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no task %q in this session: it never existed or was forgotten after its ttl; list the tasks with tasks/list", id)}
	}
	return t, nil
}

func (ts *taskStore) get(_ context.Context, ss *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	t, err := ts.lookup(ss, p)
	if err != nil {
		return nil, err
	}
	return &taskResult{taskInfo: t.info()}, nil
}

// result waits until the task ends and returns what the tools/call would
// have returned: the tool's result, or an error for a cancelled task.
func (ts *taskStore) result(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
	t, err := ts.lookup(ss, p)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t.mu.Lock()
	res, status := t.result, t.status
	t.mu.Unlock()
	if res == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("task %s was %s before the tool sent its result", t.id, status)}
	}
	out := *res
	out.Meta = mcp.Meta{relatedTaskKey: map[string]any{"taskId": t.id}}
	return &out, nil
}

func (ts *taskStore) list(_ context.Context, ss *mcp.ServerSession, p *listTasksParams) (*listTasksResult, error) {
	if p != nil && p.Cursor != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tasks/list has a single page here; call it without a cursor"}
	}
	ts.mu.Lock()
	var tasks []*task
	now := time.Now()
	for _, t := range ts.sessions[ss] {
		if !t.expired(now) {
			tasks = append(tasks, t)
		}
	}
	ts.mu.Unlock()
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].created.Before(tasks[j].created) })
	out := &listTasksResult{Tasks: []taskInfo{}}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, t.info())
	}
	return out, nil
}

// cancelTask cancels a running task: its call ends and the tool gets
// RAP /cancel_tool_call (RAP CA-1). The answer is the cancelled task.
func (ts *taskStore) cancelTask(_ context.Context, ss *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	t, err := ts.lookup(ss, p)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	status := t.status
	t.mu.Unlock()
	if terminal(status) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s already ended (%s), so it cannot be cancelled", t.id, status)}
	}
	// The task is cancelled at once; its call sends /cancel_tool_call in
	// the background (it may still be sending the invocation).
	t.cancel()
	t.finish(taskCancelled, nil, "cancelled by the client; the RAP tool was sent /cancel_tool_call")
	return &taskResult{taskInfo: t.info()}, nil
}

// sessionEnded cancels the session's running tasks and forgets them all.
func (ts *taskStore) sessionEnded(ss *mcp.ServerSession) {
	ts.mu.Lock()
	m := ts.sessions[ss]
	delete(ts.sessions, ss)
	ts.mu.Unlock()
	for _, t := range m {
		t.cancel()
	}
}

// firstText returns the first text of a result, for a status message.
func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return truncate(tc.Text, maxViewText)
		}
	}
	return ""
}

// initializeWithTasks is an initialize result that also declares the
// tasks capability: tasks/list, tasks/cancel and task-augmented
// tools/call.
type initializeWithTasks struct{ *mcp.InitializeResult }

func (r *initializeWithTasks) MarshalJSON() ([]byte, error) {
	return patchJSON(r.InitializeResult, func(m map[string]any) {
		caps, _ := m["capabilities"].(map[string]any)
		if caps == nil {
			caps = map[string]any{}
			m["capabilities"] = caps
		}
		caps["tasks"] = map[string]any{
			"list": map[string]any{}, "cancel": map[string]any{},
			"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
		}
	})
}

// toolsWithTaskSupport is a tools/list result whose tools say that they
// may run as tasks (execution.taskSupport "optional").
type toolsWithTaskSupport struct{ *mcp.ListToolsResult }

func (r *toolsWithTaskSupport) MarshalJSON() ([]byte, error) {
	return patchJSON(r.ListToolsResult, func(m map[string]any) {
		tools, _ := m["tools"].([]any)
		for _, t := range tools {
			if tm, ok := t.(map[string]any); ok {
				tm["execution"] = map[string]any{"taskSupport": "optional"}
			}
		}
	})
}

// patchJSON marshals v, lets patch change it as a JSON object, and
// marshals that.
func patchJSON(v any, patch func(map[string]any)) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	patch(m)
	return json.Marshal(m)
}

// liftTaskParam returns the params of a tools/call with its "task" param
// copied into _meta[taskMetaKey], where the middleware finds it; params
// without "task" come back unchanged.
func liftTaskParam(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"task"`)) {
		return params
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return params
	}
	spec, ok := m["task"]
	if !ok || bytes.Equal(bytes.TrimSpace(spec), []byte("null")) {
		return params
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return params
	}
	meta[taskMetaKey] = spec
	b, err := json.Marshal(meta)
	if err != nil {
		return params
	}
	m["_meta"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return params
	}
	return out
}

// TaskTransport wraps an MCP transport so that task-augmented tools/call
// requests reach the Server as tasks: the SDK alone would drop their
// "task" param. RunStdio and HTTPHandler use it; a caller connecting the
// MCPServer to a transport of its own wraps it with TaskTransport.
func TaskTransport(t mcp.Transport) mcp.Transport { return taskTransport{t} }

type taskTransport struct{ mcp.Transport }

func (t taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return taskConn{c}, nil
}

type taskConn struct{ mcp.Connection }

func (c taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" {
		req.Params = liftTaskParam(req.Params)
	}
	return msg, err
}

// liftTaskParamsInBody applies liftTaskParam to the tools/call requests
// of a Streamable HTTP request body (one message or a batch).
func liftTaskParamsInBody(body []byte) []byte {
	if !bytes.Contains(body, []byte(`"tools/call"`)) || !bytes.Contains(body, []byte(`"task"`)) {
		return body
	}
	trimmed := bytes.TrimSpace(body)
	lift := func(raw json.RawMessage) json.RawMessage {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return raw
		}
		var method string
		if json.Unmarshal(m["method"], &method) != nil || method != "tools/call" || m["params"] == nil {
			return raw
		}
		m["params"] = liftTaskParam(m["params"])
		out, err := json.Marshal(m)
		if err != nil {
			return raw
		}
		return out
	}
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return body
		}
		for i := range batch {
			batch[i] = lift(batch[i])
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return body
		}
		return out
	}
	return lift(trimmed)
}
