package mcpserve

// This file owns one MCP tools/call: the RAP invocation it becomes, the
// wait for the tool's callbacks, progress, cancellation and the call
// timeout, and the result it returns.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cancelTimeout bounds one /cancel_tool_call or /close_thread request.
const cancelTimeout = 5 * time.Second

// invokeTimeout bounds sending an invocation: a tool server acknowledges
// it at once (RAP TR-2).
const invokeTimeout = 30 * time.Second

// maxViewText bounds the text of a view update quoted in a progress
// message.
const maxViewText = 300

// handler returns the MCP tool handler of an exposed tool.
func (s *Server) handler(e *exposedTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.call(ctx, req, e)
	}
}

// call runs one MCP tools/call as a RAP invocation.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, e *exposedTool) (*mcp.CallToolResult, error) {
	return s.runCall(ctx, req, e, nil)
}

// runCall runs a call as a RAP invocation, for task t when it is not nil
// (tasks.go).
func (s *Server) runCall(ctx context.Context, req *mcp.CallToolRequest, e *exposedTool, t *task) (*mcp.CallToolResult, error) {
	name := e.tool.Tool.Name
	args := json.RawMessage(bytes.TrimSpace(req.Params.Arguments))
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	// RAP IN-2: a runtime checks the arguments before sending them.
	if err := e.tool.ValidateArguments(args); err != nil {
		var ae *rap.ArgumentsError
		if errors.As(err, &ae) {
			return errorResult(fmt.Sprintf("Error: the arguments do not fit the input schema of %q, so the tool was not called: %s. Call it again with arguments that fit.",
				name, strings.Join(ae.Problems, "; "))), nil
		}
		return errorResult(fmt.Sprintf("Error: %v", err)), nil
	}
	opts := []raptest.InvokeOption{raptest.InThread(s.thread(req.Session)), raptest.Unchecked()}
	if s.opts.UserID != "" {
		opts = append(opts, raptest.WithUserID(s.opts.UserID))
	}
	// The invocation is sent even when the client cancels meanwhile: the
	// tool may already run it, and only an invocation it acknowledged can
	// be cancelled (the wait below does so at once).
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), invokeTimeout)
	call, err := s.rt.Invoke(ictx, e.baseURL, name, args, opts...)
	cancel()
	if err != nil {
		s.log.Warn("mcpserve: invocation refused", "tool", name, "server", e.baseURL, "err", withoutRaptestPrefix(err))
		return errorResult(fmt.Sprintf("Error: the tool server of %q did not accept the call: %v. Check that it is running, then call the tool again.",
			name, withoutRaptestPrefix(err))), nil
	}
	c := &callState{s: s, e: e, req: req, call: call, token: req.Params.GetProgressToken(), started: time.Now(), task: t, timeout: s.opts.CallTimeout}
	if t != nil {
		c.timeout = s.opts.TaskTimeout
	}
	return c.wait(ctx)
}

// callState is one call in flight.
type callState struct {
	s       *Server
	e       *exposedTool
	req     *mcp.CallToolRequest
	call    *raptest.Call
	token   any // the client's progress token; nil when it gave none
	started time.Time
	task    *task         // the MCP task the call runs as, or nil
	timeout time.Duration // CallTimeout, or TaskTimeout for a task

	mu         sync.Mutex
	progress   float64 // the last progress value sent
	total      float64 // the last total the tool reported, 0 if none
	lastSent   time.Time
	early      *mcp.CallToolResult // set by an interaction that ends the call
	elicitURLs []string            // ids of accepted URL elicitations, completed with the result
}

// errEndedEarly cancels the wait of a call that an interaction ended.
var errEndedEarly = errors.New("the call ended before its result")

// wait follows the call's callbacks until its result, the call timeout,
// the client's cancellation or the server's shutdown.
func (c *callState) wait(ctx context.Context) (*mcp.CallToolResult, error) {
	var interactions sync.WaitGroup
	defer interactions.Wait() // after cancel below: their requests end with the call
	timeout := c.timeout
	timed, cancelTimed := context.WithTimeout(ctx, timeout)
	defer cancelTimed()
	waitCtx, end := context.WithCancelCause(timed)
	defer end(nil)
	if c.token != nil && c.s.opts.ProgressInterval > 0 {
		interactions.Go(func() { c.heartbeat(waitCtx) })
	}
	name := c.e.tool.Tool.Name
	for {
		msg, err := c.call.Next(waitCtx)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				c.cancel("the MCP client cancelled the request")
				return nil, ctx.Err()
			case context.Cause(waitCtx) == errEndedEarly:
				c.cancel("the call ended early")
				c.mu.Lock()
				res := c.early
				c.mu.Unlock()
				return res, nil
			case timed.Err() != nil:
				c.cancel("the call timeout passed")
				return errorResult(fmt.Sprintf("Error: %q sent no result within %v, the MCP server's call timeout (rap mcp serve --call-timeout), so the call was cancelled. Its work may be partly done: check before calling it again.",
					name, timeout)), nil
			default: // the server is closing
				c.cancel("the MCP server is shutting down")
				return errorResult(fmt.Sprintf("Error: the MCP server stopped while %q was running, so the call was cancelled. Its work may be partly done: check before calling it again.", name)), nil
			}
		}
		switch m := msg.(type) {
		case *rap.ToolResult:
			c.completeElicitations(ctx)
			if m.Subscription {
				return c.s.subs.confirmed(c, m), nil
			}
			c.call.Close()
			return mcpResult(m), nil
		case *rap.ViewUpdate:
			c.viewProgress(waitCtx, m)
		case *rap.UserChoice:
			interactions.Go(func() { c.askUser(waitCtx, end, m) })
		case *rap.OAuth:
			interactions.Go(func() { c.showAuth(waitCtx, end, m) })
		}
		// A subscription_event before the confirming result breaks RAP
		// SU-3; raptest records it and it is dropped here, as a runtime
		// drops it.
	}
}

// endEarly ends the call with res.
func (c *callState) endEarly(end context.CancelCauseFunc, res *mcp.CallToolResult) {
	c.mu.Lock()
	if c.early == nil {
		c.early = res
	}
	c.mu.Unlock()
	end(errEndedEarly)
}

// cancel sends RAP /cancel_tool_call for a call that ends without its
// result (RAP CA-1), then keeps its callback URL open a little while, so
// that a result the tool sends anyway is taken quietly.
func (c *callState) cancel(why string) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	name := c.e.tool.Tool.Name
	if err := c.call.Cancel(ctx); err != nil {
		c.s.log.Warn("mcpserve: /cancel_tool_call failed", "tool", name, "why", why, "err", withoutRaptestPrefix(err))
	} else {
		c.s.log.Info("mcpserve: call cancelled", "tool", name, "why", why)
	}
	c.s.afterCall(c.call)
}

// afterCall forgets a call once lateResultGrace has passed or its late
// result came, at once when the server is closing.
func (s *Server) afterCall(call *raptest.Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		call.Close()
		return
	}
	s.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), lateResultGrace)
		defer cancel()
		_, _ = call.Result(ctx)
		call.Close()
	})
}

// heartbeat tells the client, every progress interval in which nothing
// else was sent, that the call is still waiting.
func (c *callState) heartbeat(ctx context.Context) {
	every := c.s.opts.ProgressInterval
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			quiet := now.Sub(c.lastSent) >= every && now.Sub(c.started) >= every
			c.mu.Unlock()
			if quiet {
				c.notify(ctx, 0, 0, fmt.Sprintf("waiting for the result of %s (%s so far)", c.e.tool.Tool.Name, now.Sub(c.started).Round(time.Second)))
			}
		}
	}
}

// viewProgress turns a RAP view_update into a progress notification: a
// view whose content has a numeric "progress" (and "total", "message", as
// bridge/mcp sends them) gives those; any other view is quoted.
func (c *callState) viewProgress(ctx context.Context, v *rap.ViewUpdate) {
	var content struct {
		Progress *float64 `json:"progress"`
		Total    *float64 `json:"total"`
		Message  string   `json:"message"`
	}
	_ = json.Unmarshal(v.Content, &content)
	var p, total float64
	if content.Progress != nil {
		p = *content.Progress
		if content.Total != nil {
			total = *content.Total
		}
	}
	msg := content.Message
	if msg == "" && content.Progress == nil {
		msg = v.ViewType + ": " + truncate(string(v.Content), maxViewText)
	}
	if c.task != nil {
		status := msg
		if content.Progress != nil {
			status = strings.TrimSpace(fmt.Sprintf("%s (%s)", msg, progressText(p, total)))
		}
		c.task.setStatus(taskWorking, truncate(status, maxViewText))
	}
	c.notify(ctx, p, total, msg)
}

// progressText renders a progress value for a task's status message.
func progressText(p, total float64) string {
	if total > 0 {
		return fmt.Sprintf("%g of %g", p, total)
	}
	return fmt.Sprintf("progress %g", p)
}

// notify sends a progress notification when the client gave a progress
// token. MCP wants the progress value to grow with every notification:
// the tool's own value is sent when it grows; otherwise the value moves
// on by one, or, under a total the tool gave, by a thousandth of what is
// left, so that the bar does not jump.
func (c *callState) notify(ctx context.Context, p, total float64, msg string) {
	if c.token == nil {
		return
	}
	c.mu.Lock()
	switch {
	case p > c.progress && (total == 0 || p <= total):
		c.total = total
	case c.total > 0:
		p, total = c.progress+(c.total-c.progress)/1000, c.total
	default:
		p, total = c.progress+1, 0
	}
	c.progress, c.lastSent = p, time.Now()
	c.mu.Unlock()
	err := c.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: c.token, Progress: p, Total: total, Message: msg})
	if err != nil && ctx.Err() == nil {
		c.s.log.Debug("mcpserve: progress notification failed", "tool", c.e.tool.Tool.Name, "err", err)
	}
}

// mcpResult converts a RAP tool_result (RAP RE-1, RE-2) to an MCP result.
// A result whose text starts with "Error:" (RAP RE-4) is an MCP error
// result. display_as (for people, RAP RE-3) has no MCP counterpart and is
// left out.
func mcpResult(r *rap.ToolResult) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: strings.HasPrefix(r.ModelText(), "Error:")}
	if len(r.Content) == 0 {
		res.Content = []mcp.Content{&mcp.TextContent{Text: r.Text}}
		return res
	}
	for _, item := range r.Content {
		switch item.Type {
		case "image":
			data, err := base64.StdEncoding.DecodeString(item.Data)
			if err != nil {
				res.Content = append(res.Content, &mcp.TextContent{Text: fmt.Sprintf("[an image (%s) the tool sent with data that is not base64]", item.MediaType)})
				continue
			}
			res.Content = append(res.Content, &mcp.ImageContent{Data: data, MIMEType: item.MediaType})
		default:
			res.Content = append(res.Content, &mcp.TextContent{Text: item.Text})
		}
	}
	return res
}

// errorResult is an MCP error result with one text.
func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// truncate returns s cut to at most n bytes at a rune boundary, with "…"
// when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// randomHex returns n random bytes as hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
