package rap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// ToolHandler is the typed handler of a tool added with AddTool. It runs
// after the invocation has been acknowledged, on one of the server's
// workers, with In decoded from arguments that already passed the tool's
// input schema. ctx is cancelled by POST /cancel_tool_call for this call,
// by POST /close_thread for its thread and by Server.Shutdown;
// context.Cause tells which (ErrCallCancelled, ErrThreadClosed,
// ErrServerShutdown).
//
// The returned Reply becomes the call's tool result. A returned error
// becomes a tool result whose text starts with "Error: " (RAP RE-4); write
// error messages the model can act on. A panic is recovered, logged, and
// reported as an error result without internals.
type ToolHandler[In any] func(ctx context.Context, c *Call, in In) (*Reply, error)

// RawToolHandler is the handler of a tool added with AddRawTool: it
// receives the arguments object as JSON, already validated against the
// tool's input schema.
type RawToolHandler func(ctx context.Context, c *Call, args json.RawMessage) (*Reply, error)

// SubscriptionHandler is the typed handler of a subscription tool added
// with AddSubscription. It runs in the background after the subscription
// is confirmed (or, with ConfirmInHandler, before, and confirms it) and
// emits events with sub until it returns. See AddSubscription.
type SubscriptionHandler[In any] func(ctx context.Context, sub *Subscription, in In) error

// toolEntry is one registered tool.
type toolEntry struct {
	tool   Tool
	schema *Schema
	// Exactly one of run and prepare is set. prepare decodes a
	// subscription's arguments and returns the handler bound to them.
	run     func(ctx context.Context, c *Call, args json.RawMessage) (*Reply, error)
	prepare func(args json.RawMessage) (func(ctx context.Context, sub *Subscription) error, error)
	// confirmInHandler: the subscription handler confirms (ConfirmInHandler).
	confirmInHandler bool
}

// AddTool adds a tool whose arguments decode into In, in the manner of the
// MCP Go SDK's mcp.AddTool. When t.InputSchema is empty it is inferred from
// In with github.com/google/jsonschema-go: exported struct fields become
// properties named by their json tags, fields without omitempty are
// required, a `jsonschema:"..."` tag is the property's description, and
// extra properties are refused. A struct{} In declares a tool without
// parameters, {"type":"object","additionalProperties":false} (RAP TS-8).
//
// Every invocation's arguments are validated against the schema before h
// runs; invalid arguments get an error result that says what was wrong
// (RAP IN-3, IN-5) and h is not called.
//
// AddTool panics if t is nil, has no name or a name RAP TS-2 forbids
// (spaces, special characters, over 128 characters), duplicates a tool
// already added, if In has no object schema, or if the schema does not compile:
// these are programming errors found at startup.
func AddTool[In any](s *Server, t *Tool, h ToolHandler[In]) {
	if h == nil {
		panic("rap: AddTool: nil handler for tool " + toolName(t))
	}
	e := newEntry[In](t)
	e.run = func(ctx context.Context, c *Call, args json.RawMessage) (*Reply, error) {
		in, err := decodeArgs[In](args)
		if err != nil {
			return nil, err
		}
		return h(ctx, c, in)
	}
	s.addEntry(e)
}

// AddRawTool adds a tool whose handler receives the arguments as JSON, for
// tools defined at run time (bridges, generated tools). t.InputSchema must
// be set: it is compiled once here and every invocation's arguments are
// validated against it before h runs. AddRawTool panics on a nil handler,
// a missing or invalid schema, or a duplicate name.
func (s *Server) AddRawTool(t *Tool, h RawToolHandler) {
	if h == nil {
		panic("rap: AddRawTool: nil handler for tool " + toolName(t))
	}
	if t == nil || len(t.InputSchema) == 0 {
		panic("rap: AddRawTool: tool " + toolName(t) + " has no InputSchema; set one (use rap.EmptyObjectSchema for a tool without parameters)")
	}
	e := newEntry[json.RawMessage](t)
	e.run = h
	s.addEntry(e)
}

func toolName(t *Tool) string {
	if t == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", t.Name)
}

// newEntry copies t, infers its input schema from In when it has none, and
// compiles the schema.
func newEntry[In any](t *Tool) *toolEntry {
	if t == nil {
		panic("rap: nil *Tool")
	}
	if t.Name == "" {
		panic("rap: tool has no name; set Tool.Name (RAP TS-2)")
	}
	if p := nameProblem(t.Name); p != "" {
		panic("rap: tool name " + p)
	}
	tool := *t
	if len(tool.InputSchema) == 0 {
		raw, err := inferSchema[In]()
		if err != nil {
			panic(fmt.Sprintf("rap: tool %q: %v", tool.Name, err))
		}
		tool.InputSchema = raw
	} else {
		tool.InputSchema = append(json.RawMessage(nil), tool.InputSchema...)
	}
	schema, err := CompileSchema(tool.InputSchema)
	if err != nil {
		panic(fmt.Sprintf("rap: tool %q: inputSchema does not compile: %v", tool.Name, err))
	}
	return &toolEntry{tool: tool, schema: schema}
}

// inferSchema returns the JSON Schema of In's JSON form.
func inferSchema[In any]() (json.RawMessage, error) {
	rt := reflect.TypeFor[In]()
	for rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	if rt.Kind() == reflect.Struct && rt.NumField() == 0 {
		return append(json.RawMessage(nil), EmptyObjectSchema...), nil // RAP TS-8
	}
	if rt.Kind() != reflect.Struct && rt.Kind() != reflect.Map {
		return nil, fmt.Errorf("input type %s is not a struct or map; arguments are always a JSON object, so use a struct (or set Tool.InputSchema)", rt)
	}
	js, err := jsonschema.ForType(rt, nil)
	if err != nil {
		return nil, fmt.Errorf("inferring inputSchema from %s: %w", rt, err)
	}
	raw, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("encoding the inputSchema inferred from %s: %w", rt, err)
	}
	return raw, nil
}

// decodeArgs decodes validated arguments into In.
func decodeArgs[In any](args json.RawMessage) (In, error) {
	var in In
	if err := json.Unmarshal(args, &in); err != nil {
		return in, &argumentsError{err: err}
	}
	return in, nil
}

// argumentsError reports arguments that passed the schema but do not
// decode into the handler's Go type.
type argumentsError struct{ err error }

func (e *argumentsError) Error() string {
	msg := strings.TrimSuffix(strings.TrimSpace(e.err.Error()), ".")
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	if errors.As(e.err, &typeErr) || errors.As(e.err, &syntaxErr) {
		return "Error: the arguments do not fit the tool's parameters: " + msg + ". Fix the arguments to match the tool's inputSchema and call it again."
	}
	// A check of the argument type's own UnmarshalJSON, whose message
	// says what to send instead (RAP IN-5, RE-4).
	return "Error: invalid arguments: " + msg + ". Correct them and call the tool again."
}

func (e *argumentsError) Unwrap() error { return e.err }

// addEntry registers e, keeping registration order for the manifest.
func (s *Server) addEntry(e *toolEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.tools[e.tool.Name]; dup {
		panic(fmt.Sprintf("rap: tool %q added twice; tool names must be unique within a toolset (RAP TS-2)", e.tool.Name))
	}
	s.tools[e.tool.Name] = e
	s.order = append(s.order, e.tool.Name)
}

// lookup returns the tool named op.
func (s *Server) lookup(op string) (*toolEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.tools[op]
	return e, ok
}

// Toolset returns the manifest of the server's tools (RAP TS-1) with the
// given endpoint. NeedsMigration is true exactly when a Migrator is
// configured (RAP MI-1).
func (s *Server) Toolset(endpoint string) *Toolset {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := &Toolset{
		Name:           s.name,
		Description:    s.opts.Description,
		Endpoint:       endpoint,
		Tools:          make([]Tool, 0, len(s.order)),
		NeedsMigration: s.opts.Migrator != nil,
	}
	for _, name := range s.order {
		ts.Tools = append(ts.Tools, s.tools[name].tool)
	}
	return ts
}

// toolNames lists the tools for error messages.
func (s *Server) toolNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}
