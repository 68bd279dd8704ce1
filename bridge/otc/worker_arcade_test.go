package otc

// An Arcade-dialect test worker written from the published sources of
// github.com/ArcadeAI/arcade-mcp:
//   - routes /worker/health (no auth), /worker/tools, /worker/tools/invoke:
//     libs/arcade-serve/arcade_serve/core/base.py (base_path "/worker") and
//     core/components.py (CatalogComponent, CallToolComponent,
//     HealthCheckComponent require_auth=False);
//   - JWT check: HS256, audience "worker", claim ver == "1", 401 otherwise:
//     libs/arcade-serve/arcade_serve/core/auth.py and fastapi/auth.py;
//   - bodies: ToolDefinition, ToolCallRequest, ToolCallResponse,
//     ToolCallOutput, ToolCallError, ToolCallRequiresAuthorization:
//     libs/arcade-core/arcade_core/schema.py. The artifact output follows the
//     Open Tool Calling RFC (schema.py's ToolCallOutput lists "artifact" in
//     its oneOf).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// onePixelPNG is a valid 1x1 PNG.
var onePixelPNG = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
	0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
	0x42, 0x60, 0x82,
}

type arcadeWorker struct {
	t          *testing.T
	secret     []byte
	srv        *httptest.Server
	vaultKey   string
	authorized atomic.Bool
	started    chan string // execution ids of Slow.Hang calls, as they start
	hangDone   chan struct{}

	mu       sync.Mutex
	requests []json.RawMessage // every invoke body received
	tokens   []string          // every bearer token received
}

func newArcadeWorker(t *testing.T, secret string) *arcadeWorker {
	w := &arcadeWorker{t: t, secret: []byte(secret), vaultKey: "vault-" + fmt.Sprint(time.Now().UnixNano()),
		started: make(chan string, 8), hangDone: make(chan struct{}, 8)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /worker/health", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, 200, map[string]string{"status": "ok", "tool_count": "9"})
	})
	mux.HandleFunc("GET /worker/tools", w.auth(w.catalog))
	mux.HandleFunc("POST /worker/tools/invoke", w.auth(w.invoke))
	mux.HandleFunc("GET /files/chart.png", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "image/png")
		rw.Write(onePixelPNG)
	})
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	json.NewEncoder(rw).Encode(v)
}

// auth follows validate_engine_token (core/auth.py).
func (w *arcadeWorker) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			writeJSON(rw, 403, map[string]string{"detail": "Not authenticated"})
			return
		}
		w.mu.Lock()
		w.tokens = append(w.tokens, tok)
		w.mu.Unlock()
		claims := jwt.MapClaims{}
		_, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return w.secret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience("worker"), jwt.WithExpirationRequired())
		if err == nil && claims["ver"] != "1" {
			err = fmt.Errorf("Unsupported token version: %v", claims["ver"])
		}
		if err != nil {
			rw.Header().Set("WWW-Authenticate", "Bearer")
			writeJSON(rw, 401, map[string]string{"detail": "Invalid token. Error: " + err.Error()})
			return
		}
		h(rw, r)
	}
}

func arcadeParam(name string, required bool, vs string) string {
	return fmt.Sprintf(`{"name":%q,"required":%t,"description":"the %s","value_schema":%s,"inferrable":true}`, name, required, name, vs)
}

func arcadeDef(toolkit, name, desc, params, req string) string {
	if req == "" {
		req = "{}"
	}
	return fmt.Sprintf(`{"name":%q,"fully_qualified_name":"%s.%s","description":%q,
	 "toolkit":{"name":%q,"description":null,"version":"1.0.0"},
	 "input":{"parameters":[%s]},
	 "output":{"description":null,"available_modes":["value","error"],"value_schema":null},
	 "requirements":%s,"deprecation_message":null}`, name, toolkit, name, desc, toolkit, params, req)
}

func (w *arcadeWorker) catalog(rw http.ResponseWriter, r *http.Request) {
	defs := []string{
		arcadeDef("Math", "Add", "Adds two integers.", arcadeParam("a", true, `{"val_type":"integer"}`)+","+arcadeParam("b", true, `{"val_type":"integer"}`), ""),
		arcadeDef("Text", "Echo", "Echoes text.", arcadeParam("text", true, `{"val_type":"string"}`), ""),
		arcadeDef("Text", "Profile", "Returns a profile.", "", ""),
		arcadeDef("Text", "Flaky", "Fails, retryably.", "", ""),
		arcadeDef("Text", "Broken", "Fails for good.", "", ""),
		arcadeDef("Vault", "Use", "Uses a secret.", "", `{"secrets":[{"key":"VAULT_KEY"}]}`),
		arcadeDef("Github", "Me", "Who am I on GitHub.", "", `{"authorization":{"provider_id":"github","provider_type":"oauth2","oauth2":{"scopes":["read:user"]}}}`),
		arcadeDef("Pics", "Chart", "Draws a chart.", "", ""),
		arcadeDef("Pics", "Report", "Writes a PDF.", "", ""),
		arcadeDef("Slow", "Hang", "Never answers.", "", ""),
		arcadeDef("Text", "Huge", "Returns 3 MiB of text.", "", ""),
		arcadeDef("Bad", "Date", "Has a type OTC does not know.", arcadeParam("d", true, `{"val_type":"date"}`), ""),
	}
	rw.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(rw, "[%s]", strings.Join(defs, ","))
}

type arcadeCallRequest struct {
	RunID       string `json:"run_id"`
	ExecutionID string `json:"execution_id"`
	Tool        struct {
		Name, Toolkit, Version string
	} `json:"tool"`
	Inputs  map[string]any `json:"inputs"`
	Context struct {
		Authorization *struct {
			Token string `json:"token"`
		} `json:"authorization"`
		Secrets []struct{ Key, Value string } `json:"secrets"`
		UserID  string                        `json:"user_id"`
	} `json:"context"`
}

func (w *arcadeWorker) invoke(rw http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		writeJSON(rw, 422, map[string]string{"detail": err.Error()})
		return
	}
	w.mu.Lock()
	w.requests = append(w.requests, raw)
	w.mu.Unlock()
	var req arcadeCallRequest
	json.Unmarshal(raw, &req)
	if req.Tool.Version != "1.0.0" {
		writeJSON(rw, 500, map[string]string{"detail": "Tool not found in catalog with toolkit version " + req.Tool.Version})
		return
	}
	out := map[string]any{}
	switch req.Tool.Toolkit + "." + req.Tool.Name {
	case "Math.Add":
		out["value"] = int(req.Inputs["a"].(float64) + req.Inputs["b"].(float64))
	case "Text.Echo":
		out["value"] = req.Inputs["text"]
	case "Text.Profile":
		out["value"] = map[string]any{"name": "Ada", "langs": []string{"go"}}
	case "Text.Huge":
		out["value"] = strings.Repeat("é", 3<<19) // 3 MiB
	case "Text.Flaky":
		out["error"] = map[string]any{"message": "The service is busy.", "kind": "TOOL_RUNTIME_RETRY", "developer_message": "dev: shard 3 timed out",
			"can_retry": true, "additional_prompt_content": "Ask for fewer items.", "retry_after_ms": 1500}
	case "Text.Broken":
		out["error"] = map[string]any{"message": "The file does not exist.", "kind": "TOOL_RUNTIME_FATAL", "developer_message": "dev: ENOENT /data/x", "can_retry": false}
	case "Vault.Use":
		got := ""
		for _, s := range req.Context.Secrets {
			if s.Key == "VAULT_KEY" {
				got = s.Value
			}
		}
		if got == w.vaultKey {
			out["value"] = "the vault opened"
		} else {
			out["error"] = map[string]any{"message": "Secret 'VAULT_KEY' not found in context.", "kind": "TOOL_RUNTIME_FATAL"}
		}
	case "Github.Me":
		if tok := req.Context.Authorization; tok != nil && tok.Token == "gh-token-"+req.Context.UserID {
			out["value"] = "octocat via token (" + req.Context.UserID + ")"
		} else if !w.authorized.Load() {
			out["requires_authorization"] = map[string]any{"authorization_url": w.srv.URL + "/authorize/gh-1", "authorization_id": "gh-1", "scopes": []string{"read:user"}, "status": "pending"}
		} else {
			out["value"] = "octocat (" + req.Context.UserID + ")"
		}
	case "Pics.Chart":
		out["artifact"] = map[string]any{"url": w.srv.URL + "/files/chart.png", "content_type": "image/png", "size": len(onePixelPNG), "meta": map[string]any{"description": "A bar chart"}}
	case "Pics.Report":
		out["artifact"] = map[string]any{"url": w.srv.URL + "/files/report.pdf", "content_type": "application/pdf", "size": 48213, "meta": map[string]any{"description": "Quarterly report"}}
	case "Slow.Hang":
		w.started <- req.ExecutionID
		<-r.Context().Done()
		w.hangDone <- struct{}{}
		return
	default:
		writeJSON(rw, 500, map[string]string{"detail": "unknown tool"})
		return
	}
	_, failed := out["error"]
	writeJSON(rw, 200, map[string]any{"execution_id": req.ExecutionID, "finished_at": time.Now().Format(time.RFC3339Nano), "duration": 1.5, "success": !failed, "output": out})
}

func (w *arcadeWorker) lastRequest(t *testing.T) arcadeCallRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.requests) == 0 {
		t.Fatal("the worker received no call")
	}
	var r arcadeCallRequest
	json.Unmarshal(w.requests[len(w.requests)-1], &r)
	return r
}
