package otc

// Outbound OXP: a tool server built with the rap SDK answers the OXP 1.0
// routes too, so that an OXP client calls its tools synchronously. Mount
// them with ServeOXP.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/rap"
)

// OXP routes ServeOXP adds, and the version every tool is listed with.
const (
	OXPHealthPath  = "/health"
	OXPToolsPath   = "/tools"
	OXPCallPath    = "/tools/call"
	OXPToolVersion = "1.0.0"
)

// MaxOXPCallIDBytes bounds the call_id of an OXP call a server accepts, so
// that the call's group id, "oxp-" and the call_id, is an id
// /cancel_tool_call takes (rap.MaxIDBytes).
const MaxOXPCallIDBytes = rap.MaxIDBytes - len(oxpGroupPrefix)

// oxpGroupPrefix starts the RAP group id of an OXP call.
const oxpGroupPrefix = "oxp-"

var oxpUnsafe = regexp.MustCompile(`[^A-Za-z0-9_]`)

// OXPToolID returns the OXP tool id of a tool of the toolset: the toolset
// name and the tool name, each with characters other than A-Z, a-z, 0-9 and
// "_" replaced by "_", joined by "." (toolset "my-tools", tool "get-time":
// "my_tools.get_time").
func OXPToolID(toolset, tool string) string {
	return oxpUnsafe.ReplaceAllString(toolset, "_") + "." + oxpUnsafe.ReplaceAllString(tool, "_")
}

// ServeOXP makes srv answer the OXP 1.0 routes as well as RAP's (through
// rap.Server.Handle): GET /health, GET /tools (open: /health; the others
// need srv's bearer token, as RAP requests do) and POST /tools/call. A
// call runs like a RAP invocation, on one of srv's workers and recorded in
// its call journal (rap.Server.Invoke), and its result is the HTTP answer.
// The call_id is the call's idempotency key, as OXP 1.0 says: a call runs
// to its end even when its client goes away, and a request with the
// call_id of a call still running waits for that call's answer instead of
// running the tool again. Call ServeOXP before serving srv. See
// docs/otc.md, "Outbound".
func ServeOXP(srv *rap.Server) { serveOXP(srv) }

func serveOXP(srv *rap.Server) *oxpServer {
	o := &oxpServer{srv: srv, flights: map[string]*oxpFlight{}}
	srv.Handle(OXPHealthPath, http.HandlerFunc(o.health))
	srv.Handle(OXPToolsPath, http.HandlerFunc(o.tools))
	srv.Handle(OXPCallPath, http.HandlerFunc(o.call))
	return o
}

// oxpServer answers the OXP routes of one rap.Server.
type oxpServer struct {
	srv *rap.Server

	mu      sync.Mutex
	flights map[string]*oxpFlight // running calls by call_id
	joined  int                   // requests that joined a running call, for tests
}

// oxpFlight is a running call and, once done, its answer.
type oxpFlight struct {
	toolID string
	done   chan struct{}
	status int
	body   any
}

func writeOXP(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oxpMessage(msg string) map[string]string { return map[string]string{"message": msg} }

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeOXP(w, http.StatusMethodNotAllowed, oxpMessage("method not allowed; use "+allow))
}

// authorized answers 401 and reports false when r lacks srv's bearer token.
func (o *oxpServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if o.srv.Authorized(r) {
		return true
	}
	bearer.Challenge(w.Header(), "rap")
	writeOXP(w, http.StatusUnauthorized, oxpMessage("missing or wrong bearer token"))
	return false
}

func (o *oxpServer) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	if !o.srv.Started() {
		writeOXP(w, http.StatusServiceUnavailable, oxpMessage("tool server not started"))
		return
	}
	writeOXP(w, http.StatusOK, map[string]string{"status": "ok"})
}

// oxpDefinition is an OXP ToolDefinition.
type oxpDefinition struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Version      string          `json:"version"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	Requirements map[string]any  `json:"requirements,omitempty"`
}

func (o *oxpServer) tools(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, http.MethodGet)
		return
	}
	if !o.authorized(w, r) {
		return
	}
	ts := o.srv.Toolset("")
	out := make([]oxpDefinition, 0, len(ts.Tools))
	for _, t := range ts.Tools {
		id := OXPToolID(ts.Name, t.Name)
		name := strings.ReplaceAll(id, ".", "_")
		if len(name) > 64 {
			name = name[:64]
		}
		d := oxpDefinition{ID: id + "@" + OXPToolVersion, Name: name, Description: t.Description, Version: OXPToolVersion, InputSchema: t.InputSchema}
		if o.srv.IsSubscription(t.Name) {
			d.Description = strings.TrimSpace(d.Description + "\n\n(A RAP subscription tool: it sends events over time and can only be called through RAP.)")
		}
		if a := t.Annotations; a != nil && a.RequiresAuth != "" {
			d.Requirements = map[string]any{"authorization": []map[string]string{{"id": a.RequiresAuth}}}
		}
		out = append(out, d)
	}
	writeOXP(w, http.StatusOK, map[string]any{"items": out})
}

// oxpCallRequest is the body of POST /tools/call.
type oxpCallRequest struct {
	Request *struct {
		CallID  string          `json:"call_id"`
		ToolID  string          `json:"tool_id"`
		Input   json.RawMessage `json:"input"`
		Context struct {
			UserID string `json:"user_id"`
		} `json:"context"`
	} `json:"request"`
}

// call answers POST /tools/call: 400 for a body that is not a call or an
// unknown tool, 422 for input that does not fit the tool's schema, 503
// when the server is not started or is busy, and otherwise 200 with the
// CallToolResponse.
func (o *oxpServer) call(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if !o.authorized(w, r) {
		return
	}
	body, ok := o.srv.ReadBody(w, r)
	if !ok {
		return
	}
	var req oxpCallRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Request == nil || req.Request.ToolID == "" {
		writeOXP(w, http.StatusBadRequest, oxpMessage(`the body must be {"request": {"tool_id": "Toolkit.Tool", "input": {...}}}`))
		return
	}
	q := req.Request
	if len(q.CallID) > MaxOXPCallIDBytes {
		writeOXP(w, http.StatusBadRequest, oxpMessage(fmt.Sprintf("call_id is %d bytes, over the %d-byte limit", len(q.CallID), MaxOXPCallIDBytes)))
		return
	}
	id, _, _ := strings.Cut(q.ToolID, "@")
	ts := o.srv.Toolset("")
	op := ""
	for _, t := range ts.Tools {
		if OXPToolID(ts.Name, t.Name) == id {
			op = t.Name
			break
		}
	}
	if op == "" {
		writeOXP(w, http.StatusBadRequest, oxpMessage(fmt.Sprintf("unknown tool %q; GET %s lists the tools", q.ToolID, OXPToolsPath)))
		return
	}
	callID := q.CallID
	if callID == "" {
		callID = uuid.NewString()
	}
	f, first := o.join(callID, id)
	if f == nil {
		writeOXP(w, http.StatusBadRequest, oxpMessage(fmt.Sprintf("call_id %q is the id of a running call of another tool; give each call its own call_id", callID)))
		return
	}
	if first {
		// The call runs to its end even if this client goes away, so
		// that a retry with the same call_id gets its answer.
		ctx := context.WithoutCancel(r.Context())
		go func() {
			f.status, f.body = o.run(ctx, op, q.ToolID, callID, q.Input, q.Context.UserID)
			o.land(callID, f)
		}()
	}
	select {
	case <-f.done:
		writeOXP(w, f.status, f.body)
	case <-r.Context().Done():
	}
}

// join returns the flight of callID: a new one (first true) when no call
// with that id runs, the running one when it calls the same tool, nil
// when it calls another.
func (o *oxpServer) join(callID, toolID string) (f *oxpFlight, first bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f := o.flights[callID]; f != nil {
		if f.toolID != toolID {
			return nil, false
		}
		o.joined++
		return f, false
	}
	f = &oxpFlight{toolID: toolID, done: make(chan struct{})}
	o.flights[callID] = f
	return f, true
}

// land publishes f's answer to the requests waiting for it and forgets it.
func (o *oxpServer) land(callID string, f *oxpFlight) {
	o.mu.Lock()
	delete(o.flights, callID)
	o.mu.Unlock()
	close(f.done)
}

// run runs one call through rap.Server.Invoke and returns the HTTP status
// and body of the answer.
func (o *oxpServer) run(ctx context.Context, op, toolID, callID string, input json.RawMessage, userID string) (int, any) {
	start := time.Now()
	result := func(text string, failed bool, value any) (int, any) {
		res := map[string]any{"call_id": callID, "success": !failed, "duration": float64(time.Since(start).Microseconds()) / 1000}
		if failed {
			res["error"] = map[string]any{"message": strings.TrimPrefix(text, "Error: "), "can_retry": false}
		} else {
			res["value"] = value
		}
		return http.StatusOK, map[string]any{"result": res}
	}
	inv := &rap.Invocation{Operation: op, Arguments: input, ID: callID, GroupID: oxpGroupPrefix + callID, UserID: userID}
	tr, err := o.srv.Invoke(ctx, inv)
	var ae *rap.ArgumentsError
	switch {
	case err == nil:
	case errors.Is(err, rap.ErrSubscriptionTool):
		return result(fmt.Sprintf("%q is a subscription tool: it sends events over time, which OXP cannot carry. Call it through a RAP runtime.", op), true, nil)
	case errors.As(err, &ae):
		return http.StatusUnprocessableEntity, oxpMessage(fmt.Sprintf("invalid input for %s: %s", toolID, strings.Join(ae.Problems, "; ")))
	case errors.Is(err, rap.ErrNotStarted):
		return http.StatusServiceUnavailable, oxpMessage("tool server not started")
	case errors.Is(err, rap.ErrBusy):
		return http.StatusServiceUnavailable, oxpMessage("tool server busy: all workers and queue slots are taken, or it is shutting down; retry later")
	case errors.Is(err, rap.ErrCallRunning):
		return http.StatusBadRequest, oxpMessage(fmt.Sprintf("a call with call_id %q is already running", callID))
	default: // the call journal failed
		return http.StatusServiceUnavailable, oxpMessage("tool server could not record the call durably; retry later")
	}
	if strings.HasPrefix(tr.Text, "Error: ") && len(tr.Content) == 0 {
		return result(tr.Text, true, nil)
	}
	if len(tr.Content) == 0 {
		return result("", false, tr.Text)
	}
	return result("", false, map[string]any{"text": tr.ModelText(), "content": tr.Content})
}
