package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/bridge/toolsjson"
	"github.com/gorap/gorap/examples/toolsjson/weatherapi/api"
	"github.com/gorap/gorap/raptest"
	apitypes "github.com/gorap/gorap/runtime/api"
)

const demoKey = "wk-7f3e0c9a-secret-value"

// copyExampleBundle copies examples/toolsjson/agents/demo, points its http
// tool at apiURL and re-pins the digest, as an author would.
func copyExampleBundle(t *testing.T, apiURL string) string {
	t.Helper()
	src := filepath.Join("..", "..", "examples", "toolsjson", "agents", "demo")
	dst := filepath.Join(t.TempDir(), "agents", "demo")
	if err := os.MkdirAll(filepath.Join(dst, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tools.json", "manifest.toml", "policy.caps", "schemas/notes.note.v1.json"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "tools.json" {
			data = bytes.ReplaceAll(data, []byte("http://127.0.0.1:8099"), []byte(apiURL))
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := toolsjson.PinDigest(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// rap toolsjson init/digest and rap validate on bundles.
func TestToolsJSONInitDigestValidate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agents", "new")
	if code, out, errOut := runCmd(t, "toolsjson", "init", dir); code != 0 || !strings.Contains(out, "version 1") {
		t.Fatalf("init: %d %s %s", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "validate", dir); code != 0 || !strings.Contains(out, "OK: bundle") {
		t.Fatalf("validate fresh bundle: %d %s", code, out)
	}
	if code, _, _ := runCmd(t, "toolsjson", "init", dir); code != 1 {
		t.Fatal("init over an existing tools.json must fail")
	}
	// The manifest's other tables survive a re-pin.
	mp := filepath.Join(dir, "manifest.toml")
	m, _ := os.ReadFile(mp)
	os.WriteFile(mp, append([]byte("[agent]\nname = \"new\"\n\n"), append(m, "\n[artifacts.policy]\npath = \"policy.caps\"\n"...)...), 0o644)

	tp := filepath.Join(dir, "tools.json")
	bad := `{"version":1,"tools":[{"id":"a.b","description":"d","transport":{"kind":"exec","command":"tool"},"input_schema":{"$ref":"schema:x"},"result_schema":{"type":"object"}}]}`
	os.WriteFile(tp, []byte(bad), 0o644)
	code, out, _ := runCmd(t, "validate", tp)
	if code != 1 {
		t.Fatalf("validate tampered: exit %d\n%s", code, out)
	}
	wantLines(t, out, "error: manifest.toml: artifacts.tools.blake3: tools.json was changed after signing: its BLAKE3 digest is "+toolsjson.Digest([]byte(bad)),
		"error: tools[0].transport.command: \"tool\" is not an absolute path",
		"error: tools[0].input_schema.$ref: \"schema:x\" is not defined", "FAIL: bundle")
	if code, out, _ := runCmd(t, "toolsjson", "digest", dir); code != 0 || !strings.Contains(out, toolsjson.Digest([]byte(bad))) {
		t.Fatalf("digest: %d %s", code, out)
	}
	m, _ = os.ReadFile(mp)
	if !strings.Contains(string(m), "[agent]\nname = \"new\"") || !strings.Contains(string(m), "[artifacts.policy]") || strings.Count(string(m), "blake3 =") != 1 {
		t.Fatalf("manifest after digest:\n%s", m)
	}
	code, out, _ = runCmd(t, "validate", dir)
	if code != 1 || strings.Contains(out, "blake3") || !strings.Contains(out, "tools[0].transport.command") {
		t.Fatalf("validate after digest: %d\n%s", code, out)
	}
	// The example bundle is valid as shipped.
	if code, out, _ := runCmd(t, "validate", filepath.Join("..", "..", "examples", "toolsjson", "agents", "demo")); code != 0 {
		t.Fatalf("example bundle: %d\n%s", code, out)
	}
}

// rap bridge toolsjson serves the example bundle: an exec tool and an http
// tool (against a local API), a secret in a header, Error results for
// failures; a tampered bundle is refused.
func TestBridgeToolsJSONCommand(t *testing.T) {
	clearRAPEnv(t)
	apiSrv := httptest.NewServer(api.Handler(demoKey))
	defer apiSrv.Close()
	dir := copyExampleBundle(t, apiSrv.URL)
	// A failing exec tool too.
	failing := filepath.Join(t.TempDir(), "fail.sh")
	os.WriteFile(failing, []byte("#!/bin/sh\necho 'quota exceeded' >&2\nexit 9\n"), 0o755)
	tp := filepath.Join(dir, "tools.json")
	data, _ := os.ReadFile(tp)
	data = bytes.Replace(data, []byte(`"tools": [`), []byte(`"tools": [
    {"id": "notes.fail", "description": "Always fails.", "transport": {"kind": "exec", "command": "`+failing+`"},
     "input_schema": {"type": "object"}, "result_schema": {"type": "object"}},`), 1)
	os.WriteFile(tp, data, 0o644)
	if err := toolsjson.PinDigest(dir); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEMO_WEATHER_API_KEY", demoKey)
	dataDir := t.TempDir()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"bridge", "toolsjson", dir, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--no-confirm"}, stdout, stderr)
	}()
	var base string
	deadline := time.Now().Add(20 * time.Second)
	for base == "" {
		if _, after, ok := strings.Cut(stdout.String(), " on http://"); ok {
			if line, _, ok := strings.Cut(after, "\n"); ok {
				base = "http://" + line
			}
		}
		select {
		case code := <-done:
			t.Fatalf("bridge exited %d\n%s\n%s", code, stdout, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge did not start\n%s\n%s", stdout, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantLines(t, stdout.String(), "notes_echo", "weather_lookup")
	rt := raptest.NewRuntime()
	defer rt.Close()
	call := func(tool string, args any) string {
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		c, err := rt.Invoke(cctx, base, tool, args)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Result(cctx)
		if err != nil {
			t.Fatal(err)
		}
		return res.ModelText()
	}
	if got := call("notes_echo", map[string]any{"note": "hello"}); got != `{"note":"hello"}` {
		t.Fatalf("exec result %q", got)
	}
	got := call("weather_lookup", map[string]any{"city": "São Paulo", "units": "metric"})
	if !strings.Contains(got, `"city":"São Paulo"`) || !strings.Contains(got, `"temperature"`) {
		t.Fatalf("http result %q", got)
	}
	if got := call("weather_lookup", map[string]any{"city": "Atlantis", "units": "metric"}); !strings.HasPrefix(got, "Error: ") || !strings.Contains(got, "404") {
		t.Fatalf("http failure %q", got)
	}
	if got := call("notes_fail", map[string]any{}); !strings.HasPrefix(got, "Error: ") || !strings.Contains(got, "exited with status 9") || !strings.Contains(got, "quota exceeded") {
		t.Fatalf("exec failure %q", got)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("bridge exit %d\n%s", code, stderr)
	}
	ts, _ := filepath.Glob(filepath.Join(dataDir, "toolsjson", "traces", "*.jsonl"))
	if len(ts) != 1 {
		t.Fatalf("traces %v", ts)
	}
	trace, _ := os.ReadFile(ts[0])
	if strings.Count(string(trace), `"type":"CT_TOOL_CALL"`) != 4 || !strings.Contains(string(trace), `"tool_id":"weather.lookup"`) {
		t.Fatalf("trace:\n%s", trace)
	}

	// rap replay answers the recorded calls and flags a missing tool.
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	rout := &syncBuffer{}
	rdone := make(chan int, 1)
	small := filepath.Join(t.TempDir(), "b")
	os.MkdirAll(filepath.Join(small, "schemas"), 0o755)
	for _, f := range []string{"policy.caps", "schemas/notes.note.v1.json"} {
		data, _ := os.ReadFile(filepath.Join(dir, f))
		os.WriteFile(filepath.Join(small, f), data, 0o644)
	}
	var doc struct {
		Version int               `json:"version"`
		Tools   []json.RawMessage `json:"tools"`
	}
	data, _ = os.ReadFile(filepath.Join(dir, "tools.json"))
	json.Unmarshal(data, &doc)
	doc.Tools = doc.Tools[1:2] // notes.echo only
	data, _ = json.Marshal(doc)
	os.WriteFile(filepath.Join(small, "tools.json"), data, 0o644)
	toolsjson.PinDigest(small)
	go func() {
		rdone <- run(rctx, []string{"replay", ts[0], "--bundle", small, "--listen", "127.0.0.1:0", "--data-dir", dataDir}, rout, io.Discard)
	}()
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(rout.String(), "REPLAY") {
		if time.Now().After(deadline) {
			t.Fatalf("replay did not start: %s", rout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantLines(t, rout.String(), `MISSING TOOL: the trace records tool "weather.lookup"`)
	rcancel()
	<-rdone

	// One byte changed: refused, both digests shown, nothing served.
	data, _ = os.ReadFile(tp)
	pinned := toolsjson.Digest(data)
	data[len(data)-2] = ' '
	os.WriteFile(tp, data, 0o644)
	code, out, errOut := runCmd(t, "bridge", "toolsjson", dir, "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	if code != 1 || !strings.Contains(errOut, pinned) || !strings.Contains(errOut, toolsjson.Digest(data)) || strings.Contains(out, "serving") {
		t.Fatalf("tampered: exit %d\n%s\n%s", code, out, errOut)
	}
}

// rap serve with a tools_json entry: the model calls the exec and the http tool, the
// user is asked through the runtime's client API (Deny leaves it unrun,
// Allow runs it), the result reaches the model, and the secret appears in
// no log, trace, audit record, store file or result.
func TestServeToolsJSONEntry(t *testing.T) {
	clearRAPEnv(t)
	var hits atomic.Int32
	h := api.Handler(demoKey)
	apiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	defer apiSrv.Close()
	dir := t.TempDir()
	bundle := copyExampleBundle(t, apiSrv.URL)
	t.Setenv("DEMO_WEATHER_API_KEY", demoKey)
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"tool_sets":[{"type":"tools_json","bundle":%q}]}`, bundle)), 0o644)
	script := writeScript(t, dir, `{"turns": [
  {"when": {"user_contains": "weather", "last_input": "user"}, "repeat": true, "tool_calls": [{"name": "weather_lookup", "arguments": {"city": "Paris", "units": "metric"}}]},
  {"when": {"user_contains": "note", "last_input": "user"}, "repeat": true, "tool_calls": [{"name": "notes_echo", "arguments": {"note": "buy milk"}}]},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}", "repeat": true},
  {"text": "ok", "repeat": true}
]}`)
	s := baseSettings(t, "scripted:"+script, cfg)
	info, stdout, stderr, stop := runningServe(t, s)
	wantLines(t, stdout.String(), "tools.json:", "tool servers: http://demo.toolsjson.rap.invalid") // served in process, no port

	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, info.URL)
	answer := func(selected int, want string) {
		sendMessage(t, info.URL, th.ID, "weather in Paris?")
		var choices []apitypes.Choice
		deadline := time.Now().Add(30 * time.Second)
		for len(choices) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no user choice; stderr:\n%s", stderr)
			}
			time.Sleep(20 * time.Millisecond)
			var err error
			if choices, err = rapClient(t, info.URL, "").Choices(context.Background(), th.ID); err != nil {
				t.Fatal(err)
			}
		}
		c := choices[0]
		if c.ToolName != "weather_lookup" || strings.Join(c.Choices, "/") != "Allow/Deny" || c.Default != 1 || !strings.Contains(c.Prompt, `"city":"Paris"`) {
			t.Fatalf("choice %+v", c)
		}
		if hits.Load() != 0 && selected == 1 {
			t.Fatal("the tool ran before the user chose")
		}
		if _, err := rapClient(t, info.URL, "").AnswerChoice(context.Background(), th.ID, c.CallID, selected); err != nil {
			t.Fatal(err)
		}
		waitAnswer(t, info.URL, th.ID, want)
	}
	answer(1, "the user denied running tool")
	if hits.Load() != 0 {
		t.Fatal("a denied tool ran")
	}
	answer(0, `"temperature"`)
	if hits.Load() != 1 {
		t.Fatalf("api hits %d", hits.Load())
	}
	// The exec tool: no confirmation needed, its result reaches the model.
	sendMessage(t, info.URL, th.ID, "note this")
	waitAnswer(t, info.URL, th.ID, `Result: {"note":"buy milk"}`)
	msgs := getHistoryAuth(t, info.URL, th.ID, "")
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Grep everything the run produced for the secret.
	everything := stdout.String() + stderr.String() + jsonString(msgs)
	filepath.WalkDir(s.DataDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			everything += "\n" + p + "\n" + string(data)
		}
		return nil
	})
	if strings.Contains(everything, demoKey) {
		t.Fatal("the secret leaked into logs, store, traces or results")
	}
	if !strings.Contains(everything, "CT_TOOL_RESULT") || !strings.Contains(everything, "runtime.db") {
		t.Fatal("the grep did not see the trace and the store")
	}
}

// rap serve refuses to start with an invalid tools_json bundle and prints
// every violation with its path.
func TestServeRefusesInvalidBundle(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	bundle := filepath.Join(dir, "agents", "bad")
	os.MkdirAll(bundle, 0o755)
	os.WriteFile(filepath.Join(bundle, "tools.json"), []byte(`{"version":3,"tools":[]}`), 0o644)
	if err := toolsjson.PinDigest(bundle); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(`{"tool_sets":[{"type":"tools_json","bundle":"agents/bad"}]}`), 0o644)
	code, out, errOut := runCmd(t, "serve", "--config", cfg, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--model", "scripted:"+writeScript(t, dir, tokyoScript))
	if code != 1 || !strings.Contains(errOut, "tool_sets[0]") || !strings.Contains(errOut, "version: is 3") || strings.Contains(out, "listening") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
