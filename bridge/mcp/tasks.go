package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks (SEP-1686). For a tool the server runs as a
// task, the bridge sends tools/call with a "task" member, stores the task
// id durably (as a record in the rap Store's subscription table, kind
// "mcp_task"), polls tasks/get at the server's pollInterval, sends each
// new statusMessage as a progress view update, and on a terminal status
// fetches tasks/result and delivers it as the call's one RAP result. A
// bridge started on the same Store resumes polling the stored tasks and
// delivers their results through the Store's outbox. /cancel_tool_call
// and /close_thread send tasks/cancel. See taskconn.go (stdio) and
// taskhttp.go (Streamable HTTP) for the hand-written
// JSON-RPC part and docs/mcp.md for the limits.

// DefaultTaskTimeout is the default of Options.TaskTimeout.
const DefaultTaskTimeout = time.Hour

// Bounds of the poll interval the server suggests.
const (
	minTaskPoll     = 20 * time.Millisecond
	maxTaskPoll     = 30 * time.Second
	defaultTaskPoll = time.Second
)

// taskKind marks the bridge's task records in the Store.
const taskKind = "mcp_task"

// taskInfo is an MCP Task (tasks/get, CreateTaskResult.task, and the
// params of notifications/tasks/status).
type taskInfo struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	StatusMessage string   `json:"statusMessage,omitempty"`
	PollInterval  *float64 `json:"pollInterval,omitempty"` // milliseconds
}

// taskRecord is what the bridge stores about a task in flight.
type taskRecord struct {
	Kind     string    `json:"kind"`
	Server   string    `json:"server"`
	Tool     string    `json:"tool"` // the MCP tool name
	TaskID   string    `json:"task_id"`
	Deadline time.Time `json:"deadline"`
	PollMS   float64   `json:"poll_ms,omitempty"`
}

// taskState is the bridge's task bookkeeping.
type taskState struct {
	conns sync.Map // *sdk.ClientSession -> taskCaller

	mu      sync.Mutex
	wake    map[string]chan taskInfo              // task id -> status notifications
	resumed map[[2]string]context.CancelCauseFunc // (group, id) -> resumed task
	stop    context.CancelCauseFunc               // ends resumed tasks at Shutdown
	wg      sync.WaitGroup
}

// errBridgeStopping ends resumed tasks at Shutdown: they stay stored.
var errBridgeStopping = errors.New("the bridge is shutting down")

// statusUpdate hands a notifications/tasks/status to the task's poller.
func (s *taskState) statusUpdate(ti taskInfo) {
	s.mu.Lock()
	ch := s.wake[ti.TaskID]
	s.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- ti:
	default:
	}
}

func (s *taskState) watch(id string) (chan taskInfo, func()) {
	ch := make(chan taskInfo, 1)
	s.mu.Lock()
	if s.wake == nil {
		s.wake = map[string]chan taskInfo{}
	}
	s.wake[id] = ch
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		if s.wake[id] == ch {
			delete(s.wake, id)
		}
		s.mu.Unlock()
	}
}

// taskConnFor returns the task connection of cs, nil when it has none
// (a Streamable HTTP server: see docs/mcp.md).
func (b *Bridge) taskConnFor(cs *sdk.ClientSession) taskCaller {
	v, _ := b.tasks.conns.Load(cs)
	tc, _ := v.(taskCaller)
	return tc
}

// taskCaller sends the bridge's own task requests on one MCP session:
// a *taskConn (stdio) or an *httpTaskConn (Streamable HTTP).
type taskCaller interface {
	// call sends method with params and returns the result.
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
	// usesTask reports whether tool is called as a task.
	usesTask(ctx context.Context, tool string) bool
}

// liveTaskConn waits for the live session and returns its task connection.
func (b *Bridge) liveTaskConn(ctx context.Context) (taskCaller, error) {
	cs, err := b.currentSession(ctx, b.opts.RestartWait)
	if err != nil {
		return nil, err
	}
	tc := b.taskConnFor(cs)
	if tc == nil {
		return nil, fmt.Errorf("Error: the %s no longer runs tasks over this connection", b.describe())
	}
	return tc, nil
}

// callTask runs one tools/call as an MCP task for the RAP call c.
func (b *Bridge) callTask(ctx context.Context, c *rap.Call, tc taskCaller, mcpName string, args json.RawMessage, token string) (*rap.Reply, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := map[string]any{"name": mcpName, "arguments": args, "task": map[string]any{}, "_meta": map[string]any{"progressToken": token}}
	raw, err := tc.call(ctx, "tools/call", params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, b.callError(mcpName, err)
	}
	var created struct {
		Task *taskInfo `json:"task"`
	}
	if json.Unmarshal(raw, &created) != nil || created.Task == nil {
		// A server may answer a task-augmented call at once.
		var res sdk.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, b.malformed(mcpName, "tools/call", err)
		}
		return mapResult(b.opts.Name, mcpName, &res), nil
	}
	if created.Task.TaskID == "" {
		return nil, b.malformed(mcpName, "tools/call", errors.New("the task has no taskId"))
	}
	rec := taskRecord{Kind: taskKind, Server: b.opts.Name, Tool: mcpName, TaskID: created.Task.TaskID,
		Deadline: time.Now().Add(b.opts.TaskTimeout)}
	if created.Task.PollInterval != nil {
		rec.PollMS = *created.Task.PollInterval
	}
	inv := *c.Invocation
	if err := b.storeTask(ctx, inv, rec); err != nil {
		b.log.Error("mcp bridge: could not store a task; it will not survive a restart of the bridge", "task_id", rec.TaskID, "error", err)
	}
	defer b.forgetTask(inv)
	emit := func(ctx context.Context, content map[string]any) {
		sctx, cancel := context.WithTimeout(ctx, progressSendTimeout)
		defer cancel()
		_ = c.UpdateView(sctx, ProgressViewType, content)
	}
	return b.pollTask(ctx, rec, *created.Task, emit)
}

// pollTask polls the task until it ends, its deadline passes or ctx ends
// (then it sends tasks/cancel), and returns its mapped result.
func (b *Bridge) pollTask(ctx context.Context, rec taskRecord, first taskInfo, emit func(context.Context, map[string]any)) (*rap.Reply, error) {
	dctx, cancel := context.WithDeadline(ctx, rec.Deadline)
	defer cancel()
	wake, unwatch := b.tasks.watch(rec.TaskID)
	defer unwatch()
	interval := pollInterval(rec.PollMS)
	lastMsg, n := "", 0
	ti := first
	for {
		if ti.PollInterval != nil {
			interval = pollInterval(*ti.PollInterval)
		}
		if ti.StatusMessage != "" && ti.StatusMessage != lastMsg {
			lastMsg, n = ti.StatusMessage, n+1
			emit(dctx, map[string]any{"progress": n, "message": ti.StatusMessage, "status": ti.Status, "tool": rec.Tool})
		}
		switch ti.Status {
		case "completed", "failed", "input_required":
			// tasks/result waits for the end; requests the task makes
			// meanwhile (elicitation) reach the SDK's handlers.
			return b.taskResult(ctx, dctx, rec)
		case "cancelled":
			return nil, fmt.Errorf("Error: the MCP server %q cancelled the task of %q (%s). Call the tool again if the result is still needed.", b.opts.Name, rec.Tool, orDefault(ti.StatusMessage, "no reason given"))
		case "working", "":
		default:
			return nil, b.malformed(rec.Tool, "tasks/get", fmt.Errorf("unknown task status %q", ti.Status))
		}
		t := time.NewTimer(interval)
		select {
		case <-dctx.Done():
			t.Stop()
			return nil, b.taskEnded(ctx, rec)
		case st := <-wake:
			t.Stop()
			if st.StatusMessage != "" {
				ti.StatusMessage = st.StatusMessage
			}
			if st.Status != "" {
				ti.Status = st.Status
			}
			if st.Status != "" && st.Status != "working" {
				continue // act on it before polling
			}
		case <-t.C:
		}
		tc, err := b.liveTaskConn(dctx)
		if err != nil {
			if dctx.Err() != nil {
				return nil, b.taskEnded(ctx, rec)
			}
			return nil, err
		}
		raw, err := tc.call(dctx, "tasks/get", map[string]any{"taskId": rec.TaskID})
		if err != nil {
			if dctx.Err() != nil {
				return nil, b.taskEnded(ctx, rec)
			}
			if errors.Is(err, errTaskConnClosed) {
				continue // the server restarts: ask the next one
			}
			return nil, b.taskError(rec, "tasks/get", err)
		}
		var next taskInfo
		if err := json.Unmarshal(raw, &next); err != nil || next.Status == "" {
			if err == nil {
				err = errors.New("no status")
			}
			return nil, b.malformed(rec.Tool, "tasks/get", err)
		}
		ti = next
	}
}

// taskResult fetches tasks/result and maps it.
func (b *Bridge) taskResult(ctx, dctx context.Context, rec taskRecord) (*rap.Reply, error) {
	tc, err := b.liveTaskConn(dctx)
	if err != nil {
		if dctx.Err() != nil {
			return nil, b.taskEnded(ctx, rec)
		}
		return nil, err
	}
	raw, err := tc.call(dctx, "tasks/result", map[string]any{"taskId": rec.TaskID})
	if err != nil {
		if dctx.Err() != nil {
			return nil, b.taskEnded(ctx, rec)
		}
		return nil, b.taskError(rec, "tasks/result", err)
	}
	var res sdk.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, b.malformed(rec.Tool, "tasks/result", err)
	}
	return mapResult(b.opts.Name, rec.Tool, &res), nil
}

// taskEnded is the error of a task whose call ended before it did: it
// sends tasks/cancel unless the bridge is shutting down (a stored task
// is then resumed by the next start).
func (b *Bridge) taskEnded(ctx context.Context, rec taskRecord) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, errBridgeStopping) {
		return cause
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if tc, err := b.liveTaskConn(cctx); err == nil {
		if _, err := tc.call(cctx, "tasks/cancel", map[string]any{"taskId": rec.TaskID}); err != nil {
			b.log.Warn("mcp bridge: tasks/cancel failed", "task_id", rec.TaskID, "error", err)
		}
	}
	if ctx.Err() != nil {
		return cause // the rap server words the cancellation
	}
	return fmt.Errorf("Error: the task of %q on the MCP server %q did not finish within %v, so the bridge cancelled it. Call the tool again, or raise the bridge's task timeout if the tool needs longer.", rec.Tool, b.opts.Name, b.opts.TaskTimeout)
}

// taskError words a failed tasks/get or tasks/result.
func (b *Bridge) taskError(rec taskRecord, method string, err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return fmt.Errorf("Error: the MCP server %q answered %s for the task of %q with JSON-RPC error %d: %s. The task's result is lost; call the tool again.", b.opts.Name, method, rec.Tool, we.Code, strings.TrimSpace(we.Message))
	}
	return fmt.Errorf("Error: %s for the task of %q on the %s failed: %v. Call the tool again.", method, rec.Tool, b.describe(), err)
}

// malformed words an answer the bridge cannot read.
func (b *Bridge) malformed(tool, method string, err error) error {
	return fmt.Errorf("Error: the MCP server %q gave an answer to %s for %q that the bridge cannot read (%v); the call has no result. Report this to the MCP server's authors.", b.opts.Name, method, tool, err)
}

func pollInterval(ms float64) time.Duration {
	if ms <= 0 {
		return defaultTaskPoll
	}
	return min(max(time.Duration(ms*float64(time.Millisecond)), minTaskPoll), maxTaskPoll)
}

// storeTask records the task of inv in the Store (no Store: nothing).
func (b *Bridge) storeTask(ctx context.Context, inv rap.Invocation, rec taskRecord) error {
	st := b.opts.Server.Store
	if st == nil {
		return nil
	}
	state, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	inv.Arguments = json.RawMessage(`{}`) // arguments are not kept
	return st.SaveSubscription(ctx, rap.SubscriptionRecord{Invocation: inv, State: state, Created: time.Now()})
}

// forgetTask deletes the task record of inv.
func (b *Bridge) forgetTask(inv rap.Invocation) {
	st := b.opts.Server.Store
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.DeleteSubscription(ctx, inv.GroupID, inv.ID); err != nil {
		b.log.Error("mcp bridge: could not forget a finished task", "group_id", inv.GroupID, "id", inv.ID, "error", err)
	}
}

// resumeTasks resumes polling every task this bridge stored before it
// stopped. Their results go through the Store's outbox.
func (b *Bridge) resumeTasks(ctx context.Context) {
	st := b.opts.Server.Store
	if st == nil {
		return
	}
	recs, err := st.ListSubscriptions(ctx)
	if err != nil {
		b.log.Error("mcp bridge: could not list the stored tasks; they resume at the next start", "error", err)
		return
	}
	sender := rap.NewSender(rap.SenderOptions{Outbox: st, Logger: b.log})
	base, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	b.tasks.mu.Lock()
	b.tasks.stop = stop
	if b.tasks.resumed == nil {
		b.tasks.resumed = map[[2]string]context.CancelCauseFunc{}
	}
	b.tasks.mu.Unlock()
	for _, r := range recs {
		var rec taskRecord
		if json.Unmarshal(r.State, &rec) != nil || rec.Kind != taskKind || rec.Server != b.opts.Name || rec.TaskID == "" {
			continue
		}
		inv := r.Invocation
		tctx, cancel := context.WithCancelCause(base)
		key := [2]string{inv.GroupID, inv.ID}
		b.tasks.mu.Lock()
		b.tasks.resumed[key] = cancel
		b.tasks.mu.Unlock()
		b.log.Info("mcp bridge: resuming a task that was running when the bridge stopped", "task_id", rec.TaskID, "group_id", inv.GroupID, "id", inv.ID)
		b.tasks.wg.Add(1)
		go func() {
			defer b.tasks.wg.Done()
			defer func() {
				b.tasks.mu.Lock()
				delete(b.tasks.resumed, key)
				b.tasks.mu.Unlock()
				cancel(nil)
			}()
			b.runResumed(tctx, sender, inv, rec)
		}()
	}
}

// runResumed polls one resumed task and delivers its result.
func (b *Bridge) runResumed(ctx context.Context, sender *rap.Sender, inv rap.Invocation, rec taskRecord) {
	emit := func(ctx context.Context, content map[string]any) {
		raw, _ := json.Marshal(content)
		sctx, cancel := context.WithTimeout(ctx, progressSendTimeout)
		defer cancel()
		_ = sender.SendFor(sctx, inv.CallbackURL, inv.ID, &rap.ViewUpdate{GroupID: inv.GroupID, ViewType: ProgressViewType, Content: raw})
	}
	rep, err := b.pollTask(ctx, rec, taskInfo{TaskID: rec.TaskID, Status: "working"}, emit)
	if errors.Is(context.Cause(ctx), errBridgeStopping) {
		return // stays stored for the next start
	}
	res := &rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, CallID: inv.CallID}
	switch {
	case err == nil:
		res.Text, res.Content, res.DisplayAs = rep.Text, rep.Content, rep.DisplayAs
	case errors.Is(context.Cause(ctx), rap.ErrCallCancelled), errors.Is(context.Cause(ctx), rap.ErrThreadClosed):
		res.Text = fmt.Sprintf("Error: %q was cancelled at the runtime's request before it finished. Call it again if the result is still needed.", inv.Operation)
	default:
		res.Text = err.Error()
		if !strings.HasPrefix(res.Text, "Error: ") {
			res.Text = "Error: " + res.Text
		}
	}
	if err := sender.Send(context.WithoutCancel(ctx), inv.CallbackURL, res); err != nil {
		b.log.Error("mcp bridge: could not store the result of a resumed task; it is polled again at the next start", "task_id", rec.TaskID, "error", err)
		return
	}
	b.forgetTask(inv)
}

// stopResumed ends the resumed tasks at Shutdown, leaving them stored.
func (b *Bridge) stopResumed() {
	b.tasks.mu.Lock()
	stop := b.tasks.stop
	b.tasks.mu.Unlock()
	if stop != nil {
		stop(errBridgeStopping)
	}
	b.tasks.wg.Wait()
}

// interceptCancel cancels resumed tasks named by a /cancel_tool_call or
// /close_thread request (the rap server does not know them), and returns
// the request with its body restored for the rap server.
func (b *Bridge) interceptCancel(r *http.Request) *http.Request {
	if r.Method != http.MethodPost || (r.URL.Path != rap.CancelToolCallPath && r.URL.Path != rap.CloseThreadPath) {
		return r
	}
	b.tasks.mu.Lock()
	none := len(b.tasks.resumed) == 0
	b.tasks.mu.Unlock()
	if none {
		return r
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return r
	}
	var req struct {
		ThreadID   string `json:"thread_id"`
		ToolCallID string `json:"tool_call_id"`
	}
	if json.Unmarshal(body, &req) != nil || req.ThreadID == "" {
		return r
	}
	cause := rap.ErrCallCancelled
	if r.URL.Path == rap.CloseThreadPath {
		cause = rap.ErrThreadClosed
	}
	b.tasks.mu.Lock()
	for key, cancel := range b.tasks.resumed {
		if key[0] == req.ThreadID && (r.URL.Path == rap.CloseThreadPath || key[1] == req.ToolCallID) {
			cancel(cause)
		}
	}
	b.tasks.mu.Unlock()
	return r
}
