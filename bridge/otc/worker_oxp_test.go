package otc

// An OXP 1.0 test worker written from /work/shared/otc/openapi-1.0.json
// (copied to testdata/openapi-1.0.json): GET /health, GET /tools,
// POST /tools/call, authorization challenges with check_url in a 400
// ServerErrorResponse. Every request the bridge sends and every answer the
// worker gives is validated against the document's schemas with
// github.com/santhosh-tekuri/jsonschema/v6 (the library package rap uses).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// oxpSchemas compiles the OXP document's schemas once.
var oxpSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	data, err := os.ReadFile("testdata/openapi-1.0.json")
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	// The published CallToolResponse says "additionalProperties": false
	// next to a oneOf whose branches add "value" and "error"; under JSON
	// Schema 2020-12 that rejects every value and error response (only
	// sibling "properties" count). The evident intent is
	// "unevaluatedProperties": false, which counts the branches' properties;
	// the test uses that one correction (docs/otc.md says so).
	ctr := doc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)["CallToolResponse"].(map[string]any)
	delete(ctr, "additionalProperties")
	ctr["unevaluatedProperties"] = false
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("file:///oxp.json", doc); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for k, ptr := range map[string]string{
		"tools 200":    "/paths/~1tools/get/responses/200/content/application~1json/schema",
		"call request": "/paths/~1tools~1call/post/requestBody/content/application~1json/schema",
		"call 200":     "/paths/~1tools~1call/post/responses/200/content/application~1json/schema",
		"call 400":     "/components/schemas/ServerErrorResponse",
		"call 422":     "/components/schemas/ValidationErrorResponse",
		"definition":   "/components/schemas/ToolDefinition",
	} {
		s, err := c.Compile("file:///oxp.json#" + ptr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = s
	}
	return out, nil
})

func oxpValidate(t *testing.T, which string, body []byte) {
	t.Helper()
	ss, err := oxpSchemas()
	if err != nil {
		t.Fatalf("loading the OXP document: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("OXP %s: not JSON: %v: %s", which, err, body)
		return
	}
	if err := ss[which].Validate(v); err != nil {
		t.Errorf("OXP %s does not follow openapi-1.0.json: %v\nbody: %s", which, err, body)
	}
}

type oxpWorker struct {
	t         *testing.T
	srv       *httptest.Server
	key       string
	consented atomic.Bool
	checks    atomic.Int32

	mu       sync.Mutex
	requests []json.RawMessage
}

// capture records a handler's answer so that it can be validated.
type capture struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (c *capture) WriteHeader(s int)           { c.status = s; c.ResponseWriter.WriteHeader(s) }
func (c *capture) Write(b []byte) (int, error) { c.buf.Write(b); return c.ResponseWriter.Write(b) }

func newOXPWorker(t *testing.T) *oxpWorker {
	w := &oxpWorker{t: t, key: fmt.Sprintf("oxp-key-%p", t)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(rw http.ResponseWriter, r *http.Request) { rw.WriteHeader(200) })
	mux.HandleFunc("GET /tools", func(rw http.ResponseWriter, r *http.Request) {
		c := &capture{ResponseWriter: rw, status: 200}
		w.tools(c, r)
		oxpValidate(t, "tools 200", c.buf.Bytes())
		var list struct{ Items []json.RawMessage }
		json.Unmarshal(c.buf.Bytes(), &list)
		for _, it := range list.Items {
			if !strings.Contains(string(it), "Bad.") {
				oxpValidate(t, "definition", it)
			}
		}
	})
	mux.HandleFunc("POST /tools/call", func(rw http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		oxpValidate(t, "call request", body.Bytes())
		w.mu.Lock()
		w.requests = append(w.requests, body.Bytes())
		w.mu.Unlock()
		c := &capture{ResponseWriter: rw, status: 200}
		w.call(c, r, body.Bytes())
		oxpValidate(t, fmt.Sprintf("call %d", c.status), c.buf.Bytes())
	})
	mux.HandleFunc("GET /auth/inbox", func(rw http.ResponseWriter, r *http.Request) {
		w.checks.Add(1)
		if w.consented.Load() {
			writeJSON(rw, 200, map[string]string{"status": "completed", "token": "tok-inbox"})
			return
		}
		writeJSON(rw, 200, map[string]string{"status": "pending"})
	})
	mux.HandleFunc("GET /auth/never", func(rw http.ResponseWriter, r *http.Request) {
		w.checks.Add(1)
		writeJSON(rw, 200, map[string]string{"status": "pending"})
	})
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

func (w *oxpWorker) tools(rw http.ResponseWriter, r *http.Request) {
	num := `{"type":"number"}`
	items := []string{
		`{"id":"Calc.Add@1.0.0","name":"Calc_Add","description":"Adds.","version":"1.0.0","input_schema":{"type":"object","properties":{"a":` + num + `,"b":` + num + `},"required":["a","b"]},"output_schema":{"type":"number"}}`,
		`{"id":"Calc.Greet","name":"Calc_Greet","description":"Greets.","version":"1.0.0","input_schema":{"type":"object","properties":{"who":{"type":"string"}}},"output_schema":null}`,
		`{"id":"Calc.Fail","name":"Calc_Fail","description":"Fails.","version":"1.0.0"}`,
		`{"id":"Mail.Inbox","name":"Mail_Inbox","description":"Reads mail.","version":"2.0.0","requirements":{"authorization":[{"id":"google","oauth2":{"scopes":["mail.read"]}}],"user_id":true}}`,
		`{"id":"Mail.Never","name":"Mail_Never","description":"Never authorized.","version":"2.0.0","requirements":{"authorization":[{"id":"outlook"}]}}`,
		`{"id":"Keys.Use","name":"Keys_Use","description":"Uses a key.","version":"1.0.0","requirements":{"secrets":[{"id":"OXP_KEY"}]}}`,
		`{"id":"Bad.Schema","name":"Bad_Schema","description":"Its schema does not compile.","version":"1.0.0","input_schema":{"type":"object","properties":{"a":{"type":"nonsense"}}}}`,
	}
	rw.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(rw, `{"$schema":"https://openexecprotocol.org/1.0/tools","items":[%s]}`, strings.Join(items, ","))
}

type oxpCall struct {
	Request struct {
		CallID  string         `json:"call_id"`
		TraceID string         `json:"trace_id"`
		ToolID  string         `json:"tool_id"`
		Input   map[string]any `json:"input"`
		Context struct {
			Authorization []struct{ ID, Token string } `json:"authorization"`
			Secrets       []struct{ ID, Value string } `json:"secrets"`
			UserID        string                       `json:"user_id"`
		} `json:"context"`
	} `json:"request"`
}

func (w *oxpWorker) call(rw http.ResponseWriter, r *http.Request, body []byte) {
	var c oxpCall
	if err := json.Unmarshal(body, &c); err != nil {
		writeJSON(rw, 400, map[string]any{"message": "bad request: " + err.Error()})
		return
	}
	req := c.Request
	ok := func(v any) {
		writeJSON(rw, 200, map[string]any{"result": map[string]any{"call_id": req.CallID, "duration": 2.5, "success": true, "value": v}})
	}
	fail := func(e map[string]any) {
		writeJSON(rw, 200, map[string]any{"result": map[string]any{"call_id": req.CallID, "success": false, "error": e}})
	}
	switch req.ToolID {
	case "Calc.Add@1.0.0":
		a, aok := req.Input["a"].(float64)
		b, bok := req.Input["b"].(float64)
		if !aok || !bok {
			writeJSON(rw, 422, map[string]any{"message": "invalid parameters", "parameter_errors": map[string]string{"a": "must be a number"}})
			return
		}
		ok(a + b)
	case "Calc.Greet@1.0.0":
		ok("hello " + fmt.Sprint(req.Input["who"]))
	case "Calc.Fail@1.0.0":
		fail(map[string]any{"message": "Rate limited.", "developer_message": "dev: 429 from upstream", "can_retry": true, "retry_after_ms": 250, "additional_prompt_content": "Wait before calling again."})
	case "Mail.Inbox@2.0.0", "Mail.Never@2.0.0":
		check, id := "inbox", "google"
		if strings.HasPrefix(req.ToolID, "Mail.Never") {
			check, id = "never", "outlook"
		}
		for _, a := range req.Context.Authorization {
			if a.ID == id && a.Token == "tok-inbox" {
				ok(map[string]any{"unread": 3, "user": req.Context.UserID})
				return
			}
		}
		writeJSON(rw, 400, map[string]any{"message": "Authorization required", "missing_requirements": map[string]any{
			"authorization": []map[string]string{{"id": "auth-" + check, "url": w.srv.URL + "/consent/" + check, "check_url": w.srv.URL + "/auth/" + check}}}})
	case "Keys.Use@1.0.0":
		for _, s := range req.Context.Secrets {
			if s.ID == "OXP_KEY" && s.Value == w.key {
				ok("key accepted")
				return
			}
		}
		fail(map[string]any{"message": "missing key"})
	default:
		writeJSON(rw, 400, map[string]any{"message": "unknown tool " + req.ToolID})
	}
}

func (w *oxpWorker) lastCall(t *testing.T) oxpCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.requests) == 0 {
		t.Fatal("the worker received no call")
	}
	var c oxpCall
	json.Unmarshal(w.requests[len(w.requests)-1], &c)
	return c
}

func jsonschemaUnmarshal(s string) (any, error) {
	return jsonschema.UnmarshalJSON(strings.NewReader(s))
}
