package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProgressViewType is the view type of the view updates the bridge sends
// for MCP progress notifications.
const ProgressViewType = "progress"

// callTool runs one MCP tools/call for a RAP invocation. It runs on a
// worker of the rap server, after the invocation was acknowledged; ctx is
// cancelled by /cancel_tool_call, /close_thread and Shutdown, and the MCP
// SDK then sends notifications/cancelled for the request. Whatever
// happens, the returned reply or error becomes the call's one result.
func (b *Bridge) callTool(ctx context.Context, c *rap.Call, mcpName string, args json.RawMessage) (*rap.Reply, error) {
	f := &inflight{call: c, ctx: ctx}
	b.inflight.add(f)
	defer b.inflight.remove(f)
	ctx = context.WithValue(ctx, inflightKey{}, f)
	cs, err := b.sessionFor(ctx, c)
	if err != nil {
		return nil, err
	}
	sink := b.progress.open(c)
	if tc := b.taskConnFor(cs); tc != nil && tc.usesTask(ctx, mcpName) {
		rep, err := b.callTask(ctx, c, tc, mcpName, args, sink.token)
		b.progress.close(sink)
		return rep, err
	}
	params := &sdk.CallToolParams{Name: mcpName, Arguments: args}
	params.SetProgressToken(sink.token)
	res, err := b.callSync(ctx, cs, mcpName, params)
	for round := 0; err != nil && round < maxURLElicitationRounds; round++ {
		els, ok := urlElicitations(err)
		if !ok {
			break
		}
		if werr := b.awaitURLElicitations(ctx, f, mcpName, els); werr != nil {
			b.progress.close(sink)
			return nil, werr
		}
		res, err = b.callSync(ctx, cs, mcpName, params)
	}
	b.progress.close(sink) // every progress update is sent before the result
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx) // the rap server words the cancellation
		}
		var te *callTimeoutError
		if errors.As(err, &te) {
			return nil, err
		}
		return nil, b.callError(mcpName, err)
	}
	rep := mapResult(b.opts.Name, mcpName, res)
	if notes := f.takeNotes(); len(notes) > 0 {
		// What the bridge declined on the user's behalf (elicitation).
		text := "[gorap MCP bridge] " + strings.Join(notes, " ")
		if rep.Content != nil {
			rep.Content = append(rep.Content, rap.TextContent(text))
		} else {
			rep.Text += "\n\n" + text
		}
	}
	return rep, nil
}

// errCallTimedOut is the cause of a tools/call context that passed
// Options.CallTimeout.
var errCallTimedOut = errors.New("tools/call timed out")

// callTimeoutError is the error of a tools/call that passed
// Options.CallTimeout; its text is the call's result.
type callTimeoutError struct{ text string }

func (e *callTimeoutError) Error() string { return e.text }

// callSync sends one synchronous tools/call, bounded by
// Options.CallTimeout. Past it the SDK cancels the request
// (notifications/cancelled) and a *callTimeoutError says so.
func (b *Bridge) callSync(ctx context.Context, cs *sdk.ClientSession, tool string, params *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, b.opts.CallTimeout, errCallTimedOut)
	defer cancel()
	res, err := cs.CallTool(cctx, params)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errCallTimedOut) {
		return nil, &callTimeoutError{fmt.Sprintf("Error: the MCP server %q did not answer tools/call for %q within %v, so the bridge cancelled the request. The server may be stuck or the tool slow: try again later; if the tool is slow by nature, raise call_timeout in its config entry (--call-timeout for rap bridge mcp).",
			b.opts.Name, tool, b.opts.CallTimeout)}
	}
	return res, err
}

// callError turns a failed tools/call into an "Error: ..." result text
// that names the server and, for a protocol error, the JSON-RPC code.
func (b *Bridge) callError(tool string, err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return fmt.Errorf("Error: the MCP server %q answered tools/call for %q with JSON-RPC error %d: %s. Check the arguments against the tool's inputSchema and try again.", b.opts.Name, tool, we.Code, strings.TrimSpace(we.Message))
	}
	// The SDK words a lost connection in several ways (ErrConnectionClosed,
	// a read error such as EOF from a process that died).
	if errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "closed") || strings.Contains(err.Error(), "EOF") {
		return fmt.Errorf("Error: the %s stopped while running %q (%v); the bridge is restarting it. Call the tool again in a moment.", b.describe(), tool, err)
	}
	return fmt.Errorf("Error: calling %q on the %s failed: %v. Try again; if it keeps failing the MCP server may be unavailable.", tool, b.describe(), err)
}

// mapResult maps an MCP CallToolResult to a RAP reply (see docs/mcp.md):
// text stays text, images become image content, audio and blobs are
// summarised for the model, resource links and text resources become
// text the model can read, structuredContent is added as JSON text unless
// the text blocks already carry its data (structuredCovered), and isError
// becomes an "Error: ..." result.
func mapResult(server, tool string, res *sdk.CallToolResult) *rap.Reply {
	rep := &rap.Reply{}
	var texts []string
	hasImage := false
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			rep.Content = append(rep.Content, rap.TextContent(v.Text))
			texts = append(texts, v.Text)
		case *sdk.ImageContent:
			rep.Content = append(rep.Content, rap.ImageContent(base64.StdEncoding.EncodeToString(v.Data), orDefault(v.MIMEType, "application/octet-stream")))
			hasImage = true
		case *sdk.AudioContent:
			data := base64.StdEncoding.EncodeToString(v.Data)
			t := fmt.Sprintf("[audio: %s, %d bytes; audio is not passed to the model]", orDefault(v.MIMEType, "unknown type"), len(v.Data))
			rep.Content = append(rep.Content, rap.TextContent(t))
			texts = append(texts, t)
			seg, _ := json.Marshal(map[string]string{"data": data, "mediaType": v.MIMEType})
			rep.DisplayAs = append(rep.DisplayAs, rap.DisplaySegment{Type: "audio", Content: seg})
		case *sdk.ResourceLink:
			t := resourceLinkText(v)
			rep.Content = append(rep.Content, rap.TextContent(t))
			texts = append(texts, t)
		case *sdk.EmbeddedResource:
			t := embeddedText(v.Resource)
			rep.Content = append(rep.Content, rap.TextContent(t))
			texts = append(texts, t)
		default:
			raw, _ := json.Marshal(c)
			t := fmt.Sprintf("[content the bridge cannot map: %s]", truncate(string(raw), 500))
			rep.Content = append(rep.Content, rap.TextContent(t))
			texts = append(texts, t)
		}
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil && !structuredCovered(texts, raw) {
			rep.Content = append(rep.Content, rap.TextContent(string(raw)))
			texts = append(texts, string(raw))
		}
	}
	if res.IsError {
		msg := strings.TrimSpace(strings.Join(texts, "\n"))
		if msg == "" {
			msg = "it gave no details"
		}
		return &rap.Reply{Text: fmt.Sprintf("Error: the MCP tool %q of server %q reported an error: %s", tool, server, strings.TrimPrefix(msg, "Error: "))}
	}
	if !hasImage {
		// Text only: a plain text result reads the same for every model.
		rep.Text = strings.Join(texts, "\n")
		rep.Content = nil
		if rep.Text == "" {
			rep.Text = "The tool finished and returned no content."
		}
	}
	return rep
}

func resourceLinkText(l *sdk.ResourceLink) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Resource link: %s", l.URI)
	name := l.Title
	if name == "" {
		name = l.Name
	}
	if name != "" {
		fmt.Fprintf(&b, " (%s)", name)
	}
	if l.MIMEType != "" {
		fmt.Fprintf(&b, ", %s", l.MIMEType)
	}
	if l.Size != nil {
		fmt.Fprintf(&b, ", %d bytes", *l.Size)
	}
	if l.Description != "" {
		fmt.Fprintf(&b, ": %s", l.Description)
	}
	return b.String()
}

func embeddedText(r *sdk.ResourceContents) string {
	if r == nil {
		return "[an embedded resource without contents]"
	}
	mime := orDefault(r.MIMEType, "unknown type")
	if r.Blob != nil || r.Text == "" && len(r.Blob) > 0 {
		return fmt.Sprintf("[resource %s: binary, %s, %d bytes; not shown to the model]", r.URI, mime, len(r.Blob))
	}
	return fmt.Sprintf("Resource %s (%s):\n%s", r.URI, mime, r.Text)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// progressTable routes MCP progress notifications, by progress token, to
// the RAP call that made the request.
type progressTable struct {
	mu   sync.Mutex
	m    map[string]*progressSink
	next atomic.Uint64
}

// progressSink forwards one call's progress as view updates. Updates are
// coalesced: a slow runtime sees the latest progress, never a backlog.
type progressSink struct {
	token  string
	call   *rap.Call
	latest chan *sdk.ProgressNotificationParams // capacity 1
	// last is the highest progress delivered: the wire tap and the SDK's
	// handler both see each notification, and MCP progress increases.
	last    float64
	started bool
	stopped chan struct{}
	done    chan struct{}
}

func (t *progressTable) open(c *rap.Call) *progressSink {
	s := &progressSink{
		token:   "rap-" + strconv.FormatUint(t.next.Add(1), 10),
		call:    c,
		latest:  make(chan *sdk.ProgressNotificationParams, 1),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	t.mu.Lock()
	t.m[s.token] = s
	t.mu.Unlock()
	go s.run()
	return s
}

// close stops routing to s, sends its last pending update and waits for
// the sends to finish, so that no view update follows the result.
func (t *progressTable) close(s *progressSink) {
	t.mu.Lock()
	delete(t.m, s.token)
	t.mu.Unlock()
	close(s.stopped)
	<-s.done
}

func (t *progressTable) deliver(p *sdk.ProgressNotificationParams) {
	if p == nil {
		return
	}
	tok := fmt.Sprint(p.ProgressToken)
	t.mu.Lock()
	s := t.m[tok]
	t.mu.Unlock()
	if s == nil {
		return
	}
	t.mu.Lock()
	dup := s.started && p.Progress <= s.last
	s.last, s.started = max(s.last, p.Progress), true
	t.mu.Unlock()
	if dup {
		return
	}
	for {
		select {
		case s.latest <- p:
			return
		default:
		}
		select {
		case <-s.latest: // drop the older update
		default:
		}
	}
}

// progressSendTimeout bounds one view update so a stuck runtime cannot
// delay the result for long.
const progressSendTimeout = 5 * time.Second

func (s *progressSink) run() {
	defer close(s.done)
	send := func(p *sdk.ProgressNotificationParams) {
		content := map[string]any{"progress": p.Progress, "tool": s.call.ToolName()}
		if p.Total != 0 {
			content["total"] = p.Total
		}
		if p.Message != "" {
			content["message"] = p.Message
		}
		ctx, cancel := context.WithTimeout(context.Background(), progressSendTimeout)
		defer cancel()
		_ = s.call.UpdateView(ctx, ProgressViewType, content)
	}
	for {
		select {
		case p := <-s.latest:
			send(p)
		case <-s.stopped:
			select {
			case p := <-s.latest:
				send(p)
			default:
			}
			return
		}
	}
}
