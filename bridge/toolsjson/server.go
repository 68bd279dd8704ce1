package toolsjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
)

// DefaultTimeout bounds one tool call when neither the transport's
// timeout_ms nor Options.Timeout says otherwise.
const DefaultTimeout = 60 * time.Second

// DefaultConfirmTimeout is how long a confirmation waits for the user
// before it counts as Deny.
const DefaultConfirmTimeout = 10 * time.Minute

// Annotation keys of the tools of a bundle.
const (
	AnnotationID           = "x-runloop-id"
	AnnotationBudget       = "x-runloop-budget"
	AnnotationTags         = "x-runloop-tags"
	AnnotationConfirmation = "x-runloop-requires-confirmation"
)

// Options configure a Server.
type Options struct {
	// Name is the toolset's name; empty means the bundle directory's name.
	Name string
	// Secrets resolves secret ids; nil resolves none (a tool with secrets
	// then fails with an Error result and a cap_denied record).
	Secrets SecretResolver
	// Audit receives audit records as JSON lines; nil discards them.
	Audit io.Writer
	// TraceDir, when set, receives one trace file per Server (a session).
	TraceDir string
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
	// Timeout bounds a call whose transport sets no timeout_ms; zero
	// means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends http tools' requests; nil means a plain client.
	HTTPClient *http.Client
	// NoConfirm runs requires_confirmation tools without asking: the
	// operator disabled security.confirm_external_actions.
	NoConfirm bool
	// ConfirmTimeout bounds the wait for the user's choice; zero means
	// DefaultConfirmTimeout.
	ConfirmTimeout time.Duration
	// Replay, when set, answers calls from a recorded trace and runs
	// nothing.
	Replay *Replay
	// Server are the options of the underlying rap.Server; nil means
	// defaults.
	Server *rap.ServerOptions
	// Now is the clock of traces and audit records; nil means time.Now.
	Now func() time.Time
}

// Server is a bundle served as a RAP tool server. It is an http.Handler
// (the rap.Server it wraps); call Start or Serve as for a rap.Server, and
// Close to finish the trace file.
type Server struct {
	*rap.Server
	bundle *Bundle
	opts   Options
	log    *slog.Logger
	audit  *auditLog
	trace  *tracer
	client *http.Client
}

// NewServer builds the tool server of a loaded bundle. It writes a
// cap_denied audit record for each tool Load denied. Nil options take
// every default; NewServer fills the defaults in a copy, so the caller's
// Options (and its Server) are left unchanged.
func NewServer(b *Bundle, o *Options) (*Server, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ConfirmTimeout <= 0 {
		opts.ConfirmTimeout = DefaultConfirmTimeout
	}
	if opts.Name == "" {
		opts.Name = filepath.Base(b.Dir)
	}
	s := &Server{bundle: b, opts: opts, log: opts.Logger, audit: &auditLog{w: opts.Audit, now: opts.Now}, client: opts.HTTPClient}
	if s.client == nil {
		s.client = &http.Client{}
	}
	for _, d := range b.Denied {
		s.audit.write(AuditRecord{Kind: AuditCapDenied, ToolID: d.ToolID, Capability: d.Capability, Path: d.Path, Tags: d.Tags,
			Reason: "policy.caps does not grant this capability; the tool is not exposed"})
		s.log.Warn("tools.json tool denied: capability not granted", "tool", d.ToolID, "capability", d.Capability, "path", d.Path)
	}
	for _, w := range b.Warnings {
		s.log.Warn(w)
	}
	if len(b.Tools) == 0 {
		return nil, fmt.Errorf("bundle %s exposes no tools (%d denied for missing capability grants); add tools to tools.json or grants to policy.caps", b.Dir, len(b.Denied))
	}
	so := rap.ServerOptions{Description: "Tools of the bundle " + filepath.Base(b.Dir) + " (tools.json)", Logger: opts.Logger}
	if opts.Server != nil {
		so = *opts.Server
		if so.Logger == nil {
			so.Logger = opts.Logger
		}
	}
	s.Server = rap.NewServer(opts.Name, &so)
	if opts.TraceDir != "" && opts.Replay == nil {
		tr, err := newTracer(opts.TraceDir, opts.Now())
		if err != nil {
			return nil, err
		}
		s.trace = tr
	}
	for _, t := range b.Tools {
		s.AddRawTool(rapTool(t), func(ctx context.Context, c *rap.Call, args json.RawMessage) (*rap.Reply, error) {
			return s.call(ctx, c, t, args)
		})
	}
	return s, nil
}

// TracePath is the session's trace file, or "".
func (s *Server) TracePath() string {
	if s.trace == nil {
		return ""
	}
	return s.trace.path
}

// Close closes the trace file. Shut the rap.Server down first.
func (s *Server) Close() error { return s.trace.close() }

// rapTool is the RAP description of a bundle tool.
func rapTool(t *Tool) *rap.Tool {
	custom := map[string]json.RawMessage{}
	custom[AnnotationID], _ = json.Marshal(t.ID)
	if t.Budget != nil {
		custom[AnnotationBudget], _ = json.Marshal(t.Budget)
	}
	if len(t.Tags) > 0 {
		custom[AnnotationTags], _ = json.Marshal(t.Tags)
	}
	if t.RequiresConfirmation {
		custom[AnnotationConfirmation] = json.RawMessage("true")
	}
	return &rap.Tool{
		Name:        t.Name,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: &rap.Annotations{Custom: custom},
	}
}

// call runs one invocation of t. The SDK has validated args against the
// input schema before this runs.
func (s *Server) call(ctx context.Context, c *rap.Call, t *Tool, args json.RawMessage) (*rap.Reply, error) {
	if s.opts.Replay != nil {
		return s.opts.Replay.answer(t, args)
	}
	if t.RequiresConfirmation && !s.opts.NoConfirm {
		if err := s.confirm(ctx, c, t, args); err != nil {
			s.frame(Frame{Type: FrameToolResult, CallID: c.Invocation.ID, Error: err.Error()}, t)
			return nil, err
		}
	}
	secrets := map[string]string{}
	for _, id := range t.Secrets {
		if s.opts.Secrets == nil {
			return nil, s.secretDenied(t, id, errors.New("no secret resolver is configured"))
		}
		v, err := s.opts.Secrets.Resolve(ctx, id)
		if err != nil {
			return nil, s.secretDenied(t, id, err)
		}
		secrets[id] = v
	}
	red := make(redactor, 0, len(secrets))
	for _, v := range secrets {
		red = append(red, v)
	}
	timeout := s.opts.Timeout
	if t.Transport.TimeoutMS > 0 {
		timeout = time.Duration(t.Transport.TimeoutMS) * time.Millisecond
	}

	start := s.opts.Now()
	s.frame(Frame{Type: FrameToolCall, CallID: c.Invocation.ID, Payload: args}, t)
	var out []byte
	var err error
	switch t.Transport.Kind {
	case "exec":
		out, err = runExec(ctx, t, args, secrets, timeout)
	case "http":
		out, err = runHTTP(ctx, s.client, t, s.bundle.Policy, args, secrets, timeout)
	default:
		err = fmt.Errorf("transport %q is not supported", t.Transport.Kind)
	}
	if err == nil {
		out, err = checkResult(t, out)
	}
	d := s.opts.Now().Sub(start).Milliseconds()
	if err != nil {
		if ctx.Err() != nil {
			// Cancelled: the SDK sends nothing more; record it anyway.
			s.frame(Frame{Type: FrameToolResult, CallID: c.Invocation.ID, Error: "cancelled: " + context.Cause(ctx).Error(), DurationMS: &d}, t)
			return nil, context.Cause(ctx)
		}
		msg := fmt.Sprintf("Error: tool %q (%s) failed: %s", t.ID, t.Transport.Kind, red.apply(err.Error()))
		s.frame(Frame{Type: FrameToolResult, CallID: c.Invocation.ID, Error: msg, DurationMS: &d}, t)
		s.log.Info("tools.json call failed", "tool", t.ID, "call", c.Invocation.ID, "duration_ms", d, "tags", t.Tags)
		return nil, errors.New(msg)
	}
	text := red.apply(string(out))
	s.frame(Frame{Type: FrameToolResult, CallID: c.Invocation.ID, Payload: json.RawMessage(text), DurationMS: &d}, t)
	s.log.Info("tools.json call done", "tool", t.ID, "call", c.Invocation.ID, "duration_ms", d, "tags", t.Tags)
	return rap.Text(text), nil
}

// checkResult checks a tool's output against its result schema and
// returns it compacted, numbers and member order exactly as the tool wrote
// them.
func checkResult(t *Tool, out []byte) ([]byte, error) {
	if !json.Valid(out) {
		snippet := strings.TrimSpace(string(out))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "…"
		}
		return nil, fmt.Errorf("its output is not JSON (starts with %q); a tool must print one JSON document matching its result_schema", snippet)
	}
	if err := t.result.Validate(out); err != nil {
		return nil, fmt.Errorf("its output does not match result_schema (%s): %s", t.ResultRef, strings.TrimPrefix(err.Error(), "Error: "))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// secretDenied writes the cap_denied record of a secret that could not be
// resolved and returns the call's error. The resolver's message is logged,
// never the value.
func (s *Server) secretDenied(t *Tool, id string, err error) error {
	s.audit.write(AuditRecord{Kind: AuditCapDenied, ToolID: t.ID, Secret: id, Tags: t.Tags, Reason: "secret could not be resolved: " + err.Error()})
	s.log.Warn("tools.json secret not resolved", "tool", t.ID, "secret", id, "err", err)
	return fmt.Errorf("Error: tool %q cannot run: its secret %q is not available to the tool server. Tell the user to provide it (see docs/toolsjson.md, Secrets); do not retry until then", t.ID, id)
}

// frame writes a trace frame of t, with its schema references, tags and
// budget.
func (s *Server) frame(f Frame, t *Tool) {
	if s.trace == nil {
		return
	}
	f.ToolID, f.InputSchema, f.ResultSchema, f.Tags, f.Budget = t.ID, t.InputRef, t.ResultRef, t.Tags, t.Budget
	f.Time = s.opts.Now().UTC().Format(time.RFC3339Nano)
	if err := s.trace.write(f); err != nil {
		s.log.Warn("writing the tools.json trace failed", "path", s.trace.path, "err", err)
	}
}
