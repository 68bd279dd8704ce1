package rap

// A Server can also answer the OXP 1.0 routes (the Open
// eXecution Protocol, openexecprotocol.org), so that an OXP client calls its
// tools synchronously. Switch it on with ServerOptions.OXP.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorap/gorap/internal/bearer"
)

// OXP routes and the version every tool is listed with.
const (
	OXPHealthPath  = "/health"
	OXPToolsPath   = "/tools"
	OXPCallPath    = "/tools/call"
	OXPToolVersion = "1.0.0"
)

var oxpUnsafe = regexp.MustCompile(`[^A-Za-z0-9_]`)

// OXPToolID returns the OXP tool id of a tool of the toolset: the toolset
// name and the tool name, each with characters other than A-Z, a-z, 0-9 and
// "_" replaced by "_", joined by "." (toolset "my-tools", tool "get-time":
// "my_tools.get_time").
func OXPToolID(toolset, tool string) string {
	return oxpUnsafe.ReplaceAllString(toolset, "_") + "." + oxpUnsafe.ReplaceAllString(tool, "_")
}

// serveOXP answers the OXP routes and reports whether r was one of them.
func (s *Server) serveOXP(w http.ResponseWriter, r *http.Request) bool {
	switch r.URL.Path {
	case OXPHealthPath:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return true
		}
		if !s.started.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		writeOXP(w, http.StatusOK, map[string]string{"status": "ok"})
		return true
	case OXPToolsPath, OXPCallPath:
	default:
		return false
	}
	want := http.MethodGet
	if r.URL.Path == OXPCallPath {
		want = http.MethodPost
	}
	if r.Method != want {
		methodNotAllowed(w, want)
		return true
	}
	if !s.authorized(r) {
		bearer.Challenge(w.Header(), "rap")
		writeOXP(w, http.StatusUnauthorized, map[string]string{"message": "missing or wrong bearer token"})
		return true
	}
	if r.URL.Path == OXPToolsPath {
		writeOXP(w, http.StatusOK, map[string]any{"items": s.oxpTools()})
		return true
	}
	s.serveOXPCall(w, r)
	return true
}

func writeOXP(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type oxpDefinition struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Version      string          `json:"version"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	Requirements map[string]any  `json:"requirements,omitempty"`
}

// oxpTools lists the tools as OXP ToolDefinitions.
func (s *Server) oxpTools() []oxpDefinition {
	names := s.toolNames()
	out := make([]oxpDefinition, 0, len(names))
	for _, n := range names {
		e, ok := s.lookup(n)
		if !ok {
			continue
		}
		id := OXPToolID(s.name, n)
		name := strings.ReplaceAll(id, ".", "_")
		if len(name) > 64 {
			name = name[:64]
		}
		d := oxpDefinition{ID: id + "@" + OXPToolVersion, Name: name, Description: e.tool.Description, Version: OXPToolVersion, InputSchema: e.tool.InputSchema}
		if e.prepare != nil {
			d.Description = strings.TrimSpace(d.Description + "\n\n(A RAP subscription tool: it sends events over time and can only be called through RAP.)")
		}
		if a := e.tool.Annotations; a != nil && a.RequiresAuth != "" {
			d.Requirements = map[string]any{"authorization": []map[string]string{{"id": a.RequiresAuth}}}
		}
		out = append(out, d)
	}
	return out
}

// serveOXPCall runs one OXP call synchronously and answers its
// CallToolResponse. Tools that talk to the user while pending (RequestOAuth,
// AskUser, UpdateView) get an error from those methods, since OXP has no
// callbacks.
func (s *Server) serveOXPCall(w http.ResponseWriter, r *http.Request) {
	if !s.started.Load() {
		writeOXP(w, http.StatusServiceUnavailable, map[string]string{"message": "tool server not started"})
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		Request *struct {
			CallID  string          `json:"call_id"`
			ToolID  string          `json:"tool_id"`
			Input   json.RawMessage `json:"input"`
			Context struct {
				UserID string `json:"user_id"`
			} `json:"context"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Request == nil || req.Request.ToolID == "" {
		writeOXP(w, http.StatusBadRequest, map[string]string{"message": `the body must be {"request": {"tool_id": "Toolkit.Tool", "input": {...}}}`})
		return
	}
	q := req.Request
	id, _, _ := strings.Cut(q.ToolID, "@")
	var e *toolEntry
	var op string
	for _, n := range s.toolNames() {
		if OXPToolID(s.name, n) == id {
			e, _ = s.lookup(n)
			op = n
			break
		}
	}
	if e == nil {
		writeOXP(w, http.StatusBadRequest, map[string]string{"message": fmt.Sprintf("unknown tool %q; GET %s lists the tools", q.ToolID, OXPToolsPath)})
		return
	}
	callID := q.CallID
	if callID == "" {
		callID = uuid.NewString()
	}
	args := q.Input
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	start := time.Now()
	result := func(text string, failed bool, value any) {
		res := map[string]any{"call_id": callID, "success": !failed, "duration": float64(time.Since(start).Microseconds()) / 1000}
		if failed {
			res["error"] = map[string]any{"message": strings.TrimPrefix(text, "Error: "), "can_retry": false}
		} else {
			res["value"] = value
		}
		writeOXP(w, http.StatusOK, map[string]any{"result": res})
	}
	if e.prepare != nil {
		result(fmt.Sprintf("%q is a subscription tool: it sends events over time, which OXP cannot carry. Call it through a RAP runtime.", op), true, nil)
		return
	}
	if err := s.validateArgs(e.schema, args); err != nil {
		detail := err.Error()
		var ae *ArgumentsError
		if errors.As(err, &ae) {
			detail = strings.Join(ae.Problems, "; ")
		}
		writeOXP(w, http.StatusUnprocessableEntity, map[string]string{"message": fmt.Sprintf("invalid input for %s: %s", q.ToolID, detail)})
		return
	}
	inv := &Invocation{Operation: op, Arguments: args, ID: callID, GroupID: "oxp-" + callID, UserID: q.Context.UserID}
	c := &Call{Invocation: inv, srv: s}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	rep, panicked, err := s.runOXP(ctx, e, c)
	switch {
	case panicked:
		result(fmt.Sprintf("%s failed unexpectedly inside the tool server. Try again; if it keeps failing, report it to the tool's maintainers.", opName(op)), true, nil)
	case err != nil:
		result(handlerErrorText(op, err, context.Cause(ctx)), true, nil)
	default:
		tr := replyResult(rep)
		if strings.HasPrefix(tr.Text, "Error: ") && len(tr.Content) == 0 {
			result(tr.Text, true, nil)
			return
		}
		if len(tr.Content) == 0 {
			result("", false, tr.Text)
			return
		}
		result("", false, map[string]any{"text": tr.ModelText(), "content": tr.Content})
	}
}

func (s *Server) runOXP(ctx context.Context, e *toolEntry, c *Call) (rep *Reply, panicked bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("rap: tool handler panicked (OXP call)", "toolset", s.name, "operation", c.Invocation.Operation,
				"id", c.Invocation.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			panicked = true
		}
	}()
	rep, err = e.run(ctx, c, c.Invocation.Arguments)
	return rep, false, err
}
