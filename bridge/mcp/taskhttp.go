package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpTaskConn is the task part for a Streamable HTTP server. The SDK's
// HTTP connection cannot be wrapped like a stdio one (it depends on an
// SDK-internal hook), so the bridge POSTs each of its task requests
// itself, in the SDK's session (Mcp-Session-Id, MCP-Protocol-Version),
// through the same HTTP client (configured headers, progress tap), and
// reads the one response from the JSON or event-stream answer. Which
// tools run as tasks it learns from a tools/list of its own: the SDK
// drops execution.taskSupport. A server request sent on that stream (an
// elicitation while the task is input_required) goes to the bridge's
// elicitation handler and its answer is POSTed back; other requests are
// answered "method not found".
type httpTaskConn struct {
	url    string
	client *http.Client
	cs     *sdk.ClientSession
	elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
	next   atomic.Uint64

	mu       sync.Mutex
	learned  bool
	failedAt time.Time         // the last tools/list of its own failed
	tools    map[string]string // tool -> execution.taskSupport
}

// serverRequest answers a request the server sent on a response stream.
func (h *httpTaskConn) serverRequest(ctx context.Context, data []byte) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &m) != nil || m.Method == "" || len(m.ID) == 0 {
		return false
	}
	reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	var p sdk.ElicitParams
	if m.Method == "elicitation/create" && h.elicit != nil && json.Unmarshal(m.Params, &p) == nil {
		res, err := h.elicit(ctx, &sdk.ElicitRequest{Params: &p})
		if err != nil {
			reply["error"] = map[string]any{"code": jsonrpc.CodeInternalError, "message": err.Error()}
		} else {
			reply["result"] = res
		}
	} else {
		reply["error"] = map[string]any{"code": jsonrpc.CodeMethodNotFound, "message": "the gorap MCP bridge does not answer " + m.Method + " on a task's stream"}
	}
	body, _ := json.Marshal(reply)
	if req, err := h.request(ctx, body); err == nil {
		if resp, err := h.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
	}
	return true
}

// request is a POST of body in the SDK's session.
func (h *httpTaskConn) request(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.cs == nil {
		return req, nil
	}
	if sid := h.cs.ID(); sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if ir := h.cs.InitializeResult(); ir != nil && ir.ProtocolVersion != "" {
		req.Header.Set("MCP-Protocol-Version", ir.ProtocolVersion)
	}
	return req, nil
}

// usesTask reports whether tool runs as a task, listing the tools once
// per session (again when it meets a tool it has not seen).
func (h *httpTaskConn) usesTask(ctx context.Context, tool string) bool {
	h.mu.Lock()
	s, known := h.tools[tool]
	learned, failed := h.learned, time.Since(h.failedAt) < 30*time.Second
	h.mu.Unlock()
	if learned && known || failed {
		return s == "optional" || s == "required"
	}
	fail := func() bool {
		h.mu.Lock()
		h.failedAt = time.Now()
		h.mu.Unlock()
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tools := map[string]string{}
	cursor := ""
	for range 100 { // pages
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := h.call(lctx, "tools/list", params)
		if err != nil {
			return fail()
		}
		var r struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution *struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if json.Unmarshal(raw, &r) != nil {
			return fail()
		}
		for _, t := range r.Tools {
			tools[t.Name] = ""
			if t.Execution != nil {
				tools[t.Name] = t.Execution.TaskSupport
			}
		}
		if cursor = r.NextCursor; cursor == "" {
			break
		}
	}
	h.mu.Lock()
	h.tools, h.learned = tools, true
	h.mu.Unlock()
	s = tools[tool]
	return s == "optional" || s == "required"
}

// call POSTs one request and returns its result.
func (h *httpTaskConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := taskIDPrefix + strconv.FormatUint(h.next.Add(1), 10)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := h.request(ctx, body)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("%w: %v", errTaskConnClosed, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%w: the server no longer knows the session (HTTP 404)", errTaskConnClosed)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("the server answered %s with HTTP status %s", method, resp.Status)
	}
	body = nil
	r := &capReader{r: resp.Body, n: maxTaskResponse + 64<<10}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxTaskResponse+64<<10)
		var data []byte
		for sc.Scan() {
			line := sc.Bytes()
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
				continue
			}
			if len(line) == 0 && len(data) > 0 {
				if h.serverRequest(ctx, data) {
					data = data[:0]
					continue
				}
				if res, ok, err := parseResponse(data, id, method); ok {
					return res, err
				}
				data = data[:0]
			}
		}
		if len(data) > 0 {
			if res, ok, err := parseResponse(data, id, method); ok {
				return res, err
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) || errors.Is(err, errTooBig) {
				return nil, fmt.Errorf("the answer to %s is over the bridge's limit of %d bytes", method, maxTaskResponse)
			}
			return nil, fmt.Errorf("%w: %v", errTaskConnClosed, err)
		}
		return nil, fmt.Errorf("the server's event stream for %s ended without a response", method)
	}
	body, err = io.ReadAll(r)
	if err != nil && !errors.Is(err, errTooBig) {
		return nil, fmt.Errorf("%w: %v", errTaskConnClosed, err)
	}
	if err != nil || len(body) > maxTaskResponse {
		return nil, fmt.Errorf("the answer to %s is over the bridge's limit of %d bytes", method, maxTaskResponse)
	}
	if res, ok, err := parseResponse(body, id, method); ok {
		return res, err
	}
	return nil, fmt.Errorf("the server's answer to %s is not its JSON-RPC response", method)
}

// parseResponse reads data as the JSON-RPC response to id; ok is false
// when data is another message.
func parseResponse(data []byte, id, method string) (json.RawMessage, bool, error) {
	var m struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &m) != nil || m.ID != id {
		return nil, false, nil
	}
	if m.Error != nil {
		return nil, true, &jsonrpc.Error{Code: m.Error.Code, Message: m.Error.Message}
	}
	if len(m.Result) > maxTaskResponse {
		return nil, true, fmt.Errorf("the answer to %s is %d bytes, over the bridge's limit of %d", method, len(m.Result), maxTaskResponse)
	}
	return m.Result, true, nil
}

// errTooBig: a response body passed the bridge's limit.
var errTooBig = errors.New("response too large")

// capReader reads at most n bytes of r, then fails with errTooBig.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errTooBig
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}
