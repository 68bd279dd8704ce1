package otc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultSecretEnv is the environment variable the worker secret is read
// from by default: the one Arcade's own workers read
// (arcade_serve/core/base.py).
const DefaultSecretEnv = "ARCADE_WORKER_SECRET"

// TokenLifetime is how long a worker JWT is valid.
const TokenLifetime = 5 * time.Minute

// maxResponseBytes bounds a worker response the client reads.
const maxResponseBytes = 8 << 20

// ErrUnauthorized marks a 401 from the worker: the secret is wrong or
// missing.
var ErrUnauthorized = errors.New("the worker refused the bridge's credentials (HTTP 401)")

// Client talks to one OTC worker in one dialect.
type Client struct {
	// BaseURL is the worker's base URL, without /worker or /tools.
	BaseURL string
	// Dialect is the worker's dialect; Detect fills it when empty.
	Dialect Dialect
	// Secret signs the worker JWT. Empty sends no Authorization header.
	Secret []byte
	// HTTP is the client used for every request (default: a client with no
	// overall timeout; calls are bounded by their contexts).
	HTTP *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) url(path string) string {
	return strings.TrimRight(c.BaseURL, "/") + path
}

// Token returns a fresh worker JWT: HS256, audience "worker", "ver" "1" (the
// claims arcade_serve/core/auth.py validate_engine_token checks), issued
// now and expiring after TokenLifetime.
func (c *Client) Token(now time.Time) (string, error) {
	claims := jwt.MapClaims{
		"aud": "worker",
		"ver": "1",
		"iat": now.Unix(),
		"exp": now.Add(TokenLifetime).Unix(),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(c.Secret)
}

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if len(c.Secret) > 0 {
		tok, err := c.Token(time.Now())
		if err != nil {
			return nil, nil, fmt.Errorf("signing the worker token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach the worker at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return resp, nil, fmt.Errorf("reading the worker's answer to %s %s: %w", method, path, err)
	}
	if len(data) > maxResponseBytes {
		return resp, nil, fmt.Errorf("the worker's answer to %s %s is larger than %d bytes", method, path, maxResponseBytes)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return resp, data, fmt.Errorf("%s %s: %w; check that the secret the bridge reads (by default $%s) is the worker's secret", method, c.url(path), ErrUnauthorized, DefaultSecretEnv)
	}
	return resp, data, nil
}

// Detect sets c.Dialect from which health route answers 200: /worker/health
// for Arcade, /health for OXP. It does nothing when Dialect is already set.
func (c *Client) Detect(ctx context.Context) error {
	if c.Dialect != "" {
		if c.Dialect != DialectArcade && c.Dialect != DialectOXP {
			return fmt.Errorf("unknown OTC dialect %q; use %q or %q", c.Dialect, DialectArcade, DialectOXP)
		}
		return nil
	}
	var errs []string
	for _, try := range []struct {
		d    Dialect
		path string
	}{{DialectArcade, "/worker/health"}, {DialectOXP, "/health"}} {
		resp, _, err := c.do(ctx, http.MethodGet, try.path, nil)
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusOK {
			c.Dialect = try.d
			return nil
		}
		errs = append(errs, fmt.Sprintf("%s answered %d", try.path, resp.StatusCode))
	}
	return fmt.Errorf("the server at %s speaks no OTC dialect gorap knows (%s); give the dialect explicitly if it is an Arcade or OXP worker", c.BaseURL, strings.Join(errs, ", "))
}

// Health checks the worker's health route.
func (c *Client) Health(ctx context.Context) error {
	path := "/health"
	if c.Dialect == DialectArcade {
		path = "/worker/health"
	}
	resp, _, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the worker's health check %s answered %d", c.url(path), resp.StatusCode)
	}
	return nil
}

// Problem is a tool definition the bridge could not convert.
type Problem struct {
	Tool string
	Err  error
}

// Tools lists the worker's tools converted to RAP. Definitions that cannot
// be converted are returned as problems and left out; two tools that map to
// the same RAP name keep the first.
func (c *Client) Tools(ctx context.Context) ([]*Mapped, []Problem, error) {
	var raws []json.RawMessage
	switch c.Dialect {
	case DialectArcade:
		resp, data, err := c.do(ctx, http.MethodGet, "/worker/tools", nil)
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, nil, fmt.Errorf("GET %s answered %d: %s", c.url("/worker/tools"), resp.StatusCode, snippet(data))
		}
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, nil, fmt.Errorf("GET %s: the answer is not a JSON array of tool definitions: %v", c.url("/worker/tools"), err)
		}
	case DialectOXP:
		resp, data, err := c.do(ctx, http.MethodGet, "/tools", nil)
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, nil, fmt.Errorf("GET %s answered %d: %s", c.url("/tools"), resp.StatusCode, snippet(data))
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, nil, fmt.Errorf(`GET %s: the answer is not {"items": [...]}: %v`, c.url("/tools"), err)
		}
		raws = list.Items
	default:
		return nil, nil, fmt.Errorf("no dialect set; call Detect first")
	}
	var out []*Mapped
	var probs []Problem
	seen := map[string]bool{}
	for i, raw := range raws {
		m, name, err := c.mapOne(raw)
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		if err == nil && seen[m.Tool.Name] {
			err = fmt.Errorf("its RAP name %q is already taken by another tool of this worker", m.Tool.Name)
		}
		if err != nil {
			probs = append(probs, Problem{Tool: name, Err: err})
			continue
		}
		seen[m.Tool.Name] = true
		out = append(out, m)
	}
	return out, probs, nil
}

func (c *Client) mapOne(raw json.RawMessage) (*Mapped, string, error) {
	if c.Dialect == DialectArcade {
		var t ArcadeTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, "", fmt.Errorf("not a tool definition: %v", err)
		}
		name := t.FullyQualifiedName
		if name == "" {
			name = t.Toolkit.Name + "." + t.Name
		}
		m, err := MapArcade(&t)
		return m, name, err
	}
	var t OXPTool
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, "", fmt.Errorf("not a tool definition: %v", err)
	}
	m, err := MapOXP(&t)
	return m, t.ID, err
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// Call runs one tool call on the worker and returns its normalised outcome.
// A transport failure, a 401 or an answer the client cannot read is an
// error; everything the worker says about the tool is an Outcome.
func (c *Client) Call(ctx context.Context, r *CallRequest) (*Outcome, error) {
	if c.Dialect == DialectArcade {
		return c.callArcade(ctx, r)
	}
	return c.callOXP(ctx, r)
}

// callArcade POSTs a ToolCallRequest to /worker/tools/invoke
// (arcade_serve/core/components.py CallToolComponent) and reads the
// ToolCallResponse (arcade_core/schema.py).
func (c *Client) callArcade(ctx context.Context, r *CallRequest) (*Outcome, error) {
	type secret struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	tool := map[string]any{"name": r.Tool, "toolkit": r.Toolkit}
	if r.Version != "" {
		tool["version"] = r.Version
	}
	cx := map[string]any{}
	if r.UserID != "" {
		cx["user_id"] = r.UserID
	}
	if len(r.Secrets) > 0 {
		var ss []secret
		for _, k := range sortedKeys(r.Secrets) {
			ss = append(ss, secret{k, r.Secrets[k]})
		}
		cx["secrets"] = ss
	}
	for _, p := range sortedKeys(r.Tokens) {
		cx["authorization"] = map[string]any{"token": r.Tokens[p]}
		break
	}
	body := map[string]any{
		"run_id":       r.RunID,
		"execution_id": r.ExecutionID,
		"created_at":   time.Now().UTC().Format(time.RFC3339Nano),
		"tool":         tool,
		"inputs":       json.RawMessage(orEmpty(r.Inputs)),
		"context":      cx,
	}
	resp, data, err := c.do(ctx, http.MethodPost, "/worker/tools/invoke", body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the worker answered %d to the call: %s", resp.StatusCode, snippet(data))
	}
	var out struct {
		Success bool `json:"success"`
		Output  *struct {
			Value                 json.RawMessage `json:"value"`
			Error                 *ToolError      `json:"error"`
			RequiresAuthorization *struct {
				AuthorizationURL string   `json:"authorization_url"`
				AuthorizationID  string   `json:"authorization_id"`
				Scopes           []string `json:"scopes"`
				Status           string   `json:"status"`
			} `json:"requires_authorization"`
			Artifact *Artifact `json:"artifact"`
		} `json:"output"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("the worker's answer is not a ToolCallResponse: %v", err)
	}
	o := out.Output
	switch {
	case o == nil:
		return &Outcome{HasValue: true, Value: json.RawMessage("null")}, nil
	case o.Error != nil:
		return &Outcome{Error: o.Error}, nil
	case o.RequiresAuthorization != nil:
		a := o.RequiresAuthorization
		return &Outcome{Auth: &AuthChallenge{ID: a.AuthorizationID, URL: a.AuthorizationURL, Scopes: a.Scopes, Status: a.Status}}, nil
	case o.Artifact != nil:
		return &Outcome{Artifact: o.Artifact}, nil
	case !out.Success:
		return &Outcome{Error: &ToolError{Message: "the tool failed without saying why"}}, nil
	}
	v := o.Value
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	return &Outcome{HasValue: true, Value: v}, nil
}

// callOXP POSTs {"request": CallToolRequest} to /tools/call and reads the
// 200 CallToolResponse, or the 400 ServerErrorResponse whose
// missing_requirements.authorization carries the challenges, or the 422
// ValidationErrorResponse (openapi-1.0.json).
func (c *Client) callOXP(ctx context.Context, r *CallRequest) (*Outcome, error) {
	cx := map[string]any{}
	if r.UserID != "" {
		cx["user_id"] = r.UserID
	}
	if len(r.Secrets) > 0 {
		var ss []map[string]string
		for _, k := range sortedKeys(r.Secrets) {
			ss = append(ss, map[string]string{"id": k, "value": r.Secrets[k]})
		}
		cx["secrets"] = ss
	}
	if len(r.Tokens) > 0 {
		var as []map[string]string
		for _, k := range sortedKeys(r.Tokens) {
			as = append(as, map[string]string{"id": k, "token": r.Tokens[k]})
		}
		cx["authorization"] = as
	}
	req := map[string]any{
		"call_id": r.ExecutionID,
		"tool_id": r.ToolID,
		"input":   json.RawMessage(orEmpty(r.Inputs)),
		"context": cx,
	}
	if r.RunID != "" {
		req["trace_id"] = r.RunID
	}
	resp, data, err := c.do(ctx, http.MethodPost, "/tools/call", map[string]any{"request": req})
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusBadRequest:
		var se struct {
			Message             string `json:"message"`
			DeveloperMessage    string `json:"developer_message"`
			MissingRequirements *struct {
				Authorization []AuthChallenge `json:"authorization"`
				UserID        bool            `json:"user_id"`
			} `json:"missing_requirements"`
		}
		if err := json.Unmarshal(data, &se); err != nil {
			return nil, fmt.Errorf("the worker answered 400: %s", snippet(data))
		}
		if mr := se.MissingRequirements; mr != nil && len(mr.Authorization) > 0 {
			ch := mr.Authorization[0]
			return &Outcome{Auth: &ch}, nil
		}
		msg := se.Message
		if se.MissingRequirements != nil && se.MissingRequirements.UserID {
			msg += " (the tool needs a user id; the runtime must send user_id)"
		}
		return &Outcome{Error: &ToolError{Message: msg, DeveloperMessage: se.DeveloperMessage}}, nil
	case http.StatusUnprocessableEntity:
		var ve struct {
			Message         string          `json:"message"`
			ParameterErrors json.RawMessage `json:"parameter_errors"`
		}
		if err := json.Unmarshal(data, &ve); err != nil {
			return nil, fmt.Errorf("the worker answered 422: %s", snippet(data))
		}
		msg := ve.Message
		if len(ve.ParameterErrors) > 0 && string(ve.ParameterErrors) != "null" {
			msg += "; parameter errors: " + string(ve.ParameterErrors)
		}
		return &Outcome{Error: &ToolError{Message: msg, CanRetry: true}}, nil
	default:
		return nil, fmt.Errorf("the worker answered %d to the call: %s", resp.StatusCode, snippet(data))
	}
	var out struct {
		Result *struct {
			Success  bool            `json:"success"`
			Value    json.RawMessage `json:"value"`
			Error    *ToolError      `json:"error"`
			Artifact *Artifact       `json:"artifact"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Result == nil {
		return nil, fmt.Errorf(`the worker's answer is not {"result": CallToolResponse}: %s`, snippet(data))
	}
	res := out.Result
	switch {
	case res.Error != nil:
		return &Outcome{Error: res.Error}, nil
	case res.Artifact != nil:
		return &Outcome{Artifact: res.Artifact}, nil
	case !res.Success:
		return &Outcome{Error: &ToolError{Message: "the tool failed without saying why"}}, nil
	}
	v := res.Value
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	return &Outcome{HasValue: true, Value: v}, nil
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// AuthStatus polls an OXP check_url once. OXP 1.0 does not define the
// check_url's answer; gorap reads a 200 JSON object whose "status" is
// "completed" (or "authorized") as done, "failed"/"denied"/"expired" as
// refused, anything else as pending; a "token" in it is kept for the
// provider.
func (c *Client) AuthStatus(ctx context.Context, checkURL string) (status, token string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, checkURL, nil)
	if err != nil {
		return "", "", fmt.Errorf("check_url %q is not a usable URL: %v", checkURL, err)
	}
	if len(c.Secret) > 0 {
		if tok, err := c.Token(time.Now()); err == nil {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "pending", "", nil
	}
	var st struct {
		Status string `json:"status"`
		Token  string `json:"token"`
	}
	_ = json.Unmarshal(data, &st)
	return strings.ToLower(st.Status), st.Token, nil
}
