package main

// rap serve with otc_server entries and rap bridge otc + rap
// invoke, against small OTC workers of both dialects (routes and JWT checks
// from arcade_serve/core/{base,components,auth}.py; OXP bodies from
// openapi-1.0.json; the full test workers are in bridge/otc).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorap/gorap/rap"
)

func miniArcadeWorker(t *testing.T, secret string) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /worker/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			claims := jwt.MapClaims{}
			_, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return []byte(secret), nil },
				jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience("worker"))
			if err != nil || claims["ver"] != "1" {
				w.WriteHeader(401)
				fmt.Fprint(w, `{"detail":"Invalid token"}`)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /worker/tools", auth(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"name":"Add","fully_qualified_name":"Math.Add","description":"Adds.","toolkit":{"name":"Math","version":"1.0.0"},
		 "input":{"parameters":[{"name":"a","required":true,"value_schema":{"val_type":"integer"}},{"name":"b","required":true,"value_schema":{"val_type":"integer"}}]},
		 "output":{"available_modes":["value","error"]},"requirements":{"secrets":[{"key":"MINI_KEY"}]}}]`)
	}))
	mux.HandleFunc("POST /worker/tools/invoke", auth(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ExecutionID string `json:"execution_id"`
			Inputs      struct{ A, B int }
			Context     struct {
				Secrets []struct{ Key, Value string }
			}
		}
		json.NewDecoder(r.Body).Decode(&req)
		if len(req.Context.Secrets) != 1 || req.Context.Secrets[0].Key != "MINI_KEY" || req.Context.Secrets[0].Value != os.Getenv("MINI_KEY") {
			fmt.Fprintf(w, `{"execution_id":%q,"finished_at":"2026-01-01T00:00:00","duration":1,"success":false,"output":{"error":{"message":"no MINI_KEY","kind":"TOOL_RUNTIME_FATAL"}}}`, req.ExecutionID)
			return
		}
		fmt.Fprintf(w, `{"execution_id":%q,"finished_at":"2026-01-01T00:00:00","duration":1,"success":true,"output":{"value":%d}}`, req.ExecutionID, req.Inputs.A+req.Inputs.B)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func miniOXPWorker(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /tools", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"items":[{"id":"Calc.Greet","name":"Calc_Greet","description":"Greets.","version":"1.0.0","input_schema":{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}}]}`)
	})
	mux.HandleFunc("POST /tools/call", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Request struct {
				CallID string `json:"call_id"`
				Input  struct{ Who string }
			}
		}
		json.NewDecoder(r.Body).Decode(&body)
		fmt.Fprintf(w, `{"result":{"call_id":%q,"success":true,"value":"hello %s"}}`, body.Request.CallID, body.Request.Input.Who)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A conversation through rap serve calls one tool of
// each dialect (otc_server entries) and answers from its value.
func TestServeOTCServers(t *testing.T) {
	clearRAPEnv(t)
	t.Setenv("TEST_OTC_SECRET", "s3cret")
	minikey := fmt.Sprintf("mini-%d", time.Now().UnixNano())
	t.Setenv("MINI_KEY", minikey)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"tool_sets":[
	 {"type":"otc_server","name":"arcade","url":%q,"dialect":"arcade","secret_env":"TEST_OTC_SECRET"},
	 {"type":"otc_server","name":"oxp","url":%q,"no_auth":true}]}`, miniArcadeWorker(t, "s3cret"), miniOXPWorker(t))), 0o600)
	script := `{"turns": [
	  {"after_user": "sum", "tool_calls": [{"name": "Math_Add", "arguments": {"a": 2, "b": 40}}]},
	  {"after_user": "greet", "tool_calls": [{"name": "Calc_Greet", "arguments": {"who": "Ada"}}]},
	  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}", "repeat": true},
	  {"text": "ok", "repeat": true}]}`
	s := baseSettings(t, "scripted:"+writeScript(t, dir, script), cfg)
	info, _, stderr, _ := runningServe(t, s)
	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, info.URL)
	sendMessage(t, info.URL, th.ID, "sum please")
	waitAnswer(t, info.URL, th.ID, "Result: 42")
	sendMessage(t, info.URL, th.ID, "greet Ada")
	waitAnswer(t, info.URL, th.ID, "Result: hello Ada")
	if strings.Contains(stderr.String(), "s3cret") {
		t.Fatal("the worker secret appears in the log")
	}
	// The tool secret reached the worker (else the answer would be an
	// error) and appears in no log, no history and no file of the data dir
	// (the SQLite store and its journal).
	if strings.Contains(stderr.String(), minikey) || strings.Contains(jsonString(getHistoryAuth(t, info.URL, th.ID, "")), minikey) {
		t.Fatal("the tool secret appears in the log or the history")
	}
	filepath.WalkDir(s.DataDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), minikey) {
				t.Errorf("the tool secret is stored in %s", p)
			}
		}
		return nil
	})
}

// rap bridge otc WORKER_URL --listen ADDR, called with
// rap invoke; a wrong secret fails at start with a clear message.
func TestBridgeOTCCommand(t *testing.T) {
	clearRAPEnv(t)
	t.Setenv("MINI_KEY", "k")
	worker := miniArcadeWorker(t, "right")
	t.Setenv("ARCADE_WORKER_SECRET", "wrong")
	code, _, errOut := runVerb(t, invokeContext(t), "bridge", "otc", worker, "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "HTTP 401") || !strings.Contains(errOut, "ARCADE_WORKER_SECRET") {
		t.Fatalf("wrong secret: status %d, stderr:\n%s", code, errOut)
	}
	t.Setenv("ARCADE_WORKER_SECRET", "right")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"bridge", "otc", worker, "--listen", "127.0.0.1:0"}, out, &syncBuffer{})
	}()
	var url string
	deadline := time.Now().Add(30 * time.Second)
	for url == "" {
		if _, after, ok := strings.Cut(out.String(), " on http://"); ok {
			url = "http://" + strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rap bridge otc did not start: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, stdout, errOut := runVerb(t, invokeContext(t), "invoke", url, "Math_Add", `{"a":1,"b":2}`)
	if code != 0 || !strings.Contains(stdout, `"text":"3"`) {
		t.Fatalf("rap invoke: status %d\nstdout: %s\nstderr: %s", code, stdout, errOut)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("rap bridge otc exited %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rap bridge otc did not stop")
	}
	if c, _, e := runVerb(t, invokeContext(t), "bridge", "nope"); c != 2 || !strings.Contains(e, `unknown command "nope"`) {
		t.Fatalf("unknown kind: %d %s", c, e)
	}
}

// rap example --oxp answers the OXP routes; a plain
// rap example does not.
func TestExampleOXP(t *testing.T) {
	url, _, stop := startExample(t, "get-time", "--listen", "127.0.0.1:0", "--oxp")
	defer stop()
	resp, err := http.Post(url+"/tools/call", "application/json", strings.NewReader(`{"request":{"tool_id":"gettime.get_current_time"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result struct {
			Success bool   `json:"success"`
			Value   string `json:"value"`
		} `json:"result"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 200 || !out.Result.Success || out.Result.Value == "" {
		t.Fatalf("OXP call: %d %+v", resp.StatusCode, out)
	}
	plain, _, stop2 := startExample(t, "get-time", "--listen", "127.0.0.1:0")
	defer stop2()
	resp, err = http.Get(plain + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("GET /tools without --oxp: %d", resp.StatusCode)
	}
}

// rap bridge otc + rap invoke for the OXP dialect (detected), with
// --data-dir keeping its calls in DIR/NAME.db (0600), and a worker that is
// down at start stops rap bridge otc with a clear error.
func TestBridgeOTCCommandOXPAndDown(t *testing.T) {
	clearRAPEnv(t)
	t.Setenv("ARCADE_WORKER_SECRET", "")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	code, _, errOut := runVerb(t, invokeContext(t), "bridge", "otc", deadURL, "--no-auth", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "cannot reach the worker at "+deadURL) {
		t.Fatalf("worker down: status %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runVerb(t, invokeContext(t), "bridge", "otc", miniOXPWorker(t), "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "no worker secret: set the environment variable ARCADE_WORKER_SECRET") {
		t.Fatalf("no secret: status %d, stderr:\n%s", code, errOut)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	dataDir := filepath.Join(t.TempDir(), "data")
	go func() {
		done <- run(ctx, []string{"bridge", "otc", miniOXPWorker(t), "--no-auth", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, out, &syncBuffer{})
	}()
	var url string
	deadline := time.Now().Add(30 * time.Second)
	for url == "" {
		if _, after, ok := strings.Cut(out.String(), " on http://"); ok {
			url = "http://" + strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rap bridge otc did not start: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "of the oxp worker") {
		t.Fatalf("dialect not detected as oxp: %s", out.String())
	}
	code, stdout, errOut := runVerb(t, invokeContext(t), "invoke", url, "Calc_Greet", `{"who":"Ada"}`)
	if code != 0 || !strings.Contains(stdout, `"text":"hello Ada"`) {
		t.Fatalf("rap invoke: status %d\nstdout: %s\nstderr: %s", code, stdout, errOut)
	}
	cancel()
	// Stopping may take the whole grace (a callback still being retried
	// is flushed until then), and no more.
	select {
	case <-done:
	case <-time.After(rap.ShutdownGrace + 15*time.Second):
		t.Fatalf("rap bridge otc did not stop within the shutdown grace (%v)", rap.ShutdownGrace)
	}
	fi, err := os.Stat(filepath.Join(dataDir, "otc.db"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("--data-dir store: %v, %v; want DIR/otc.db with mode 0600", fi, err)
	}
}
