package rap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Reply is what a tool handler returns: the tool result the model sees.
// Text is used when Content is empty; when Content is set it supersedes
// Text for the model (RAP RE-1, RE-2). DisplayAs holds optional
// presentation hints for people (RAP RE-3).
type Reply struct {
	Text      string
	Content   []ContentItem
	DisplayAs []DisplaySegment
}

// Text returns a Reply that carries the plain text s.
func Text(s string) *Reply { return &Reply{Text: s} }

// Call is one invocation being served. A handler receives it alongside its
// decoded arguments and uses it to read the invocation and to talk to the
// user before returning its result: see RequestOAuth, AskUser and
// UpdateView.
type Call struct {
	// Invocation is the request as the runtime sent it. Handlers must not
	// modify it.
	Invocation *Invocation

	srv       *Server
	baseURL   string // public base URL of this server, for response_url
	journaled bool   // recorded in the server's CallJournal until finished
	sent      atomic.Bool
	// accepted is when the invocation was acknowledged, for the metrics;
	// zero without them, and for a call answered after a restart.
	accepted time.Time

	// resumed and state: the call was resumed by Start with the state
	// the previous process saved (resume.go).
	resumed bool
	state   json.RawMessage
	// saved: SaveState stored a state, so the call resumes after a crash
	// or Shutdown.
	saved atomic.Bool
	// result, for a call run by Server.Invoke, receives its one result
	// instead of the callback URL (buffered(1)).
	result chan *ToolResult
	// trace is the W3C trace context the invocation carried, sent back
	// with every callback; span is the handler's span, nil when the
	// server does not trace (tracing.go).
	trace traceContext
	span  trace.Span
}

// ToolName returns the operation being invoked.
func (c *Call) ToolName() string { return c.Invocation.Operation }

// ErrCallCancelled is the cause of a handler context cancelled by
// POST /cancel_tool_call (RAP CA-1). Read it with context.Cause.
var ErrCallCancelled = errors.New("rap: tool call cancelled by the runtime")

// ErrThreadClosed is the cause of a handler or subscription context
// cancelled by POST /close_thread for its thread (RAP TC-2).
var ErrThreadClosed = errors.New("rap: thread closed by the runtime")

// ErrServerShutdown is the cause of a handler or subscription context
// cancelled by Server.Shutdown.
var ErrServerShutdown = errors.New("rap: tool server shutting down")

// finish sends the invocation's one tool result. A second call is a no-op
// that reports false, so a result is never sent twice (RAP RE-1, IN-4).
func (c *Call) finish(ctx context.Context, r *ToolResult) bool {
	if !c.sent.CompareAndSwap(false, true) {
		return false
	}
	inv := c.Invocation
	r.GroupID, r.ID, r.CallID = inv.GroupID, inv.ID, inv.CallID
	c.srv.countResult(c, r)
	if c.span != nil && strings.HasPrefix(r.ModelText(), "Error:") {
		c.span.SetStatus(codes.Error, "the tool returned an error result")
	}
	if c.result != nil {
		if c.journaled {
			if err := c.srv.journal.EndCall(context.WithoutCancel(ctx), inv.GroupID, inv.ID); err != nil {
				c.srv.log.Error("rap: could not forget a finished call in the call journal", "toolset", c.srv.name,
					"operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", err)
			}
		}
		c.result <- r
		return true
	}
	if c.srv.opts.Store != nil {
		// Storing the result is a quick local write: do it even when a
		// handler outlived Shutdown's deadline, so that the next Start
		// delivers it (RAP IN-4).
		ctx = context.WithoutCancel(ctx)
	}
	// The server checked callback_url when it accepted the invocation. A
	// journaled call is forgotten as its result is stored; if storing
	// fails it stays recorded, and the next Start answers it.
	var endsGroup, endsID string
	if c.journaled {
		endsGroup, endsID = inv.GroupID, inv.ID
	}
	if err := c.srv.sender.sendEnding(withTrace(ctx, c.trace), inv.CallbackURL, r, endsGroup, endsID, ""); err != nil {
		c.srv.log.ErrorContext(ctx, "rap: could not deliver tool result",
			"operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", err)
	}
	return true
}

// replyResult turns a handler's reply into a tool result.
func replyResult(rep *Reply) *ToolResult {
	if rep == nil {
		return &ToolResult{}
	}
	return &ToolResult{Text: rep.Text, Content: rep.Content, DisplayAs: rep.DisplayAs}
}

// errorResult returns a tool result whose text starts with "Error: " as
// RAP RE-4 asks. msg should say what went wrong and what to do next.
func errorResult(msg string) *ToolResult {
	return &ToolResult{Text: errorText(msg)}
}

func errorText(msg string) string {
	msg = strings.TrimSpace(msg)
	if !strings.HasPrefix(msg, "Error: ") {
		msg = "Error: " + msg
	}
	return msg
}

// handlerErrorText is the result text for an error a handler returned.
// cause is the handler context's cancellation cause, if any.
func handlerErrorText(op string, err, cause error) string {
	switch {
	case errors.Is(cause, ErrCallCancelled):
		return fmt.Sprintf("Error: %q was cancelled at the runtime's request before it finished. Call it again if the result is still needed.", op)
	case errors.Is(cause, ErrThreadClosed):
		return fmt.Sprintf("Error: %q was stopped because its thread was closed.", op)
	case errors.Is(cause, ErrServerShutdown):
		return fmt.Sprintf("Error: the tool server shut down before %q finished. Call it again in a moment.", op)
	}
	msg := strings.TrimSpace(err.Error())
	if strings.HasPrefix(msg, "Error: ") {
		return msg // the author already wrote a complete error result
	}
	msg = strings.TrimSuffix(msg, ".")
	return fmt.Sprintf("Error: %q failed: %s. Check the arguments and try again; if it keeps failing, the tool may be unavailable.", op, msg)
}
