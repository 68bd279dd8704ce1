package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/config"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clearRAPEnv makes the test independent of the caller's RAP_* and
// provider environment.
func clearRAPEnv(t *testing.T) {
	for _, k := range []string{config.EnvConfig, config.EnvListen, config.EnvPublicURL, config.EnvDataDir, config.EnvModel,
		config.EnvToken, config.EnvToolToken, config.EnvLogLevel, envLogFormat, config.EnvSystem, config.EnvToolTimeout, config.EnvMaxSubscriptions, config.EnvStore, config.EnvMetricsListen,
		"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"} {
		t.Setenv(k, "")
	}
}

// writeScript writes a scripted model file.
func writeScript(t *testing.T, dir, script string) string {
	t.Helper()
	p := filepath.Join(dir, "script.json")
	if err := os.WriteFile(p, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeConfig(t *testing.T, dir string, servers ...string) string {
	t.Helper()
	var entries []string
	for _, s := range servers {
		entries = append(entries, fmt.Sprintf(`{"type":"toolset_server","server_url":%q}`, s))
	}
	p := filepath.Join(dir, "rap.json")
	if err := os.WriteFile(p, []byte(`{"tool_sets":[`+strings.Join(entries, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const tokyoScript = `{"turns": [
  {"after_user": "Tokyo", "tool_calls": [{"name": "get_time_in_zone", "arguments": {"timezone": "Asia/Tokyo"}}]},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}"},
  {"text": "ok", "repeat": true}
]}`

// runningServe runs serve in-process and returns its info once it
// listens; stop cancels it and returns serve's error.
func runningServe(t *testing.T, s config.Settings) (info *server, stdout, stderr *syncBuffer, stop func() error) {
	t.Helper()
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *server, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, s, stdout, stderr, func(i *server) { ready <- i }) }()
	select {
	case info = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve exited early: %v\nstderr:\n%s", err, stderr)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not start within 30s")
	}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("serve did not stop within 30s")
		}
	}
	t.Cleanup(func() { stop() })
	return info, stdout, stderr, stop
}

func baseSettings(t *testing.T, model string, cfg string) config.Settings {
	return config.Settings{
		Listen:      "127.0.0.1:0",
		DataDir:     filepath.Join(t.TempDir(), "data"),
		Model:       model,
		LogLevel:    "info",
		ConfigFiles: []string{cfg},
	}
}

// waitAnswer polls the history until the last message is an assistant
// text containing want.
func waitAnswer(t *testing.T, base, thread, want string) []api.Message {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs := getHistoryAuth(t, base, thread, "")
		if n := len(msgs); n > 0 && msgs[n-1].Role == api.RoleAssistant && strings.Contains(msgs[n-1].Text, want) {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer containing %q within 30s; history: %s", want, jsonString(msgs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getHistoryAuth(t *testing.T, base, thread, token string) []api.Message {
	t.Helper()
	msgs, err := rapClient(t, base, token).History(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// rap serve with a scripted model: it prints where it listens and the
// model (saying it is scripted), completes a tool round trip through a
// configured RAP server, and shuts down cleanly when asked; a restart on
// the same data dir keeps the thread.
func TestServeScripted(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir, startGettime(t, nil)))
	info, stdout, _, stop := runningServe(t, s)
	wantLines(t, stdout.String(), "rap serve: listening on "+info.URL, "scripted test model — not a real LLM", "tool servers: http://127.0.0.1:", "rap chat --server "+info.URL)
	if info.PublicURL != info.URL {
		t.Errorf("public URL %q should default to the bound listen URL %q", info.PublicURL, info.URL)
	}

	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, info.URL)
	sendMessage(t, info.URL, th.ID, "Time in Tokyo?")
	msgs := waitAnswer(t, info.URL, th.ID, "+09:00")
	if len(msgs) != 4 {
		t.Errorf("history has %d messages, want user, call, result, answer: %s", len(msgs), jsonString(msgs))
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	for _, f := range []string{storeFile, "callback.key"} {
		if _, err := os.Stat(filepath.Join(s.DataDir, f)); err != nil {
			t.Errorf("data dir lacks %s: %v", f, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(s.DataDir, "callback.key")); err == nil && fi.Mode().Perm() != 0o600 {
		t.Errorf("callback.key has mode %v, want 0600", fi.Mode().Perm())
	}

	// Restart on the same data dir: the history is still there.
	info2, _, _, _ := runningServe(t, s)
	if got := getHistoryAuth(t, info2.URL, th.ID, ""); len(got) != len(msgs) {
		t.Errorf("after restart the history has %d messages, want %d", len(got), len(msgs))
	}
}

// Configuration errors stop rap serve before it listens, with a message
// that names the problem (RAP CF-1).
func TestServeConfigErrors(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	script := writeScript(t, dir, tokyoScript)
	mcp := filepath.Join(dir, "mcp.json")
	os.WriteFile(mcp, []byte(`{"tool_sets":[{"type":"toolset_server","server_url":"http://127.0.0.1:1"},{"type":"toolset_command","command":[]}]}`), 0o644) // mcp_server and toolset_command entries are supported now
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte("{\n  \"tool_sets\": [\n    oops\n  ]\n}"), 0o644)

	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		code  int
		wants []string
	}{
		{"mcp entry", []string{"--config", mcp, "--model", "scripted:" + script}, nil, 1,
			[]string{mcp + ": tool_sets[1].command: is empty"}},
		{"bad json", []string{"--config", broken, "--model", "scripted:" + script}, nil, 1,
			[]string{broken + ":3: invalid JSON"}},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.json"), "--model", "scripted:" + script}, nil, 1,
			[]string{"nope.json", "no such file"}},
		{"no key", []string{"--config", writeConfig(t, dir), "--model", "anthropic:claude-x"}, nil, 1,
			[]string{"ANTHROPIC_API_KEY"}},
		{"no model", []string{"--config", writeConfig(t, dir)}, nil, 2,
			[]string{"no model configured", "--model"}},
		{"unknown provider", []string{"--config", writeConfig(t, dir), "--model", "llama:7b"}, nil, 2,
			[]string{`unknown provider "llama"`}},
		{"bad listen", []string{"--listen", "8080", "--model", "scripted:" + script}, nil, 2,
			[]string{"listen address \"8080\""}},
		{"bad env", []string{"--model", "scripted:" + script}, map[string]string{config.EnvToolTimeout: "forever"}, 2,
			[]string{config.EnvToolTimeout}},
		{"extra argument", []string{"now"}, nil, 2, []string{`unexpected argument "now"`}},
		{"bad max subscriptions env", []string{"--model", "scripted:" + script}, map[string]string{config.EnvMaxSubscriptions: "lots"}, 2,
			[]string{`invalid value "lots" for ` + config.EnvMaxSubscriptions}},
		{"negative max subscriptions", []string{"--model", "scripted:" + script, "--max-subscriptions", "-1"}, nil, 2,
			[]string{"max subscriptions -1", "--max-subscriptions N"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out, errOut bytes.Buffer
			args := append([]string{"serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, tt.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code := run(ctx, args, &out, &errOut)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, errOut.String())
			}
			for _, w := range tt.wants {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
			if strings.Contains(out.String(), "listening on") {
				t.Errorf("serve started despite the error")
			}
		})
	}
}

// With RAP_TOKEN set, the client API needs the bearer token, the callback
// endpoint stays reachable (its URLs carry their own token), and the token
// never appears in the output.
func TestServeClientToken(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir))
	s.Token = "client-secret-token-42"
	info, stdout, stderr, stop := runningServe(t, s)

	do := func(method, path, token string) int {
		req, _ := http.NewRequest(method, info.URL+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := do("GET", "/v1/threads", ""); c != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", c)
	}
	if c := do("GET", "/v1/threads", "wrong"); c != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", c)
	}
	if c := do("POST", "/v1/threads", s.Token); c/100 != 2 {
		t.Errorf("right token: %d, want 2xx", c)
	}
	// A forged callback is refused by the runtime itself (not by the
	// client token): 4xx but not 401.
	if c := do("POST", "/rap/callback/forged", ""); c == http.StatusUnauthorized || c/100 != 4 {
		t.Errorf("callback without client token: %d, want the runtime's own 4xx", c)
	}
	stop()
	for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		if strings.Contains(out, s.Token) {
			t.Errorf("%s contains the client token", name)
		}
	}
}

// --tool-token is sent to tool servers as a bearer token (RAP TR-8): a
// tool server that requires it accepts the invocation.
func TestServeToolToken(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	tools := startGettime(t, &rap.ServerOptions{BearerToken: "tool-secret"})
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir, tools))
	s.ToolToken = "tool-secret"
	info, _, stderr, _ := runningServe(t, s)
	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, info.URL)
	sendMessage(t, info.URL, th.ID, "Tokyo please")
	waitAnswer(t, info.URL, th.ID, "+09:00")
	if strings.Contains(stderr.String(), "tool-secret") {
		t.Error("the tool token appears in the log")
	}

	// Without the token the tool refuses the invocation, and the model
	// sees an error result (RAP TR-4).
	s2 := baseSettings(t, "scripted:"+writeScript(t, t.TempDir(), tokyoScript), writeConfig(t, t.TempDir(), tools))
	info2, _, _, _ := runningServe(t, s2)
	th.ID = createThread(t, info2.URL)
	sendMessage(t, info2.URL, th.ID, "Tokyo please")
	msgs := waitAnswer(t, info2.URL, th.ID, "Result: ")
	found := false
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			found = found || (r.IsError && strings.HasPrefix(r.Text, "Error"))
		}
	}
	if !found {
		t.Errorf("want an error result for the refused invocation: %s", jsonString(msgs))
	}
}

func TestParseModelSpec(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		spec, want, err string
		env             map[string]string
	}{
		{spec: "anthropic:claude-sonnet-4-5", want: "anthropic:claude-sonnet-4-5"},
		{spec: "anthropic", want: "anthropic"},
		{spec: "openai:gpt-4o", want: "openai:gpt-4o"},
		{spec: "scripted:demo.json", want: "scripted:demo.json"},
		{spec: "scripted:C:/x.json", want: "scripted:C:/x.json"},
		{spec: "scripted", err: "path of a script"},
		{spec: "gemini:pro", err: `unknown provider "gemini"`},
		{spec: "", err: "ANTHROPIC_API_KEY"},
		{spec: "", env: map[string]string{"ANTHROPIC_API_KEY": "k"}, want: "anthropic"},
		{spec: "", env: map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, want: "openai"},
	}
	for _, tt := range tests {
		clear(env)
		for k, v := range tt.env {
			env[k] = v
		}
		got, err := parseModelSpec(tt.spec, getenv)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseModelSpec(%q) err = %v, want %q", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("parseModelSpec(%q) = %v, %v; want %s", tt.spec, got, err, tt.want)
		}
	}
}

// A missing API key is an error that names the variable to set.
func TestNewModelMissingKey(t *testing.T) {
	clearRAPEnv(t)
	_, err := newModel(modelSpec{Provider: "anthropic", Arg: "claude-x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("err = %v", err)
	}
	_, err = newModel(modelSpec{Provider: "scripted", Arg: filepath.Join(t.TempDir(), "none.json")}, nil)
	if err == nil || !strings.Contains(err.Error(), "none.json") {
		t.Errorf("missing script: err = %v", err)
	}
}

func TestServeHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantLines(t, out.String(), "-config FILE", "-listen ADDR", "-public-url URL", "-data-dir DIR", "-model PROVIDER:MODEL", "-log-level", config.EnvToken)
}

// RAP SU-8: --max-subscriptions reaches the runtime: with a limit of 1,
// the second of two subscriptions of one thread gets an error result and
// the first stays active.
func TestServeMaxSubscriptions(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	script := writeScript(t, dir, `{"turns": [
  {"after_user": "two clocks", "tool_calls": [
    {"name": "subscribe_clock", "arguments": {"interval_seconds": 3600, "count": 1}},
    {"name": "subscribe_clock", "arguments": {"interval_seconds": 3600, "count": 1}}]},
  {"when": {"last_input": "tool_result"}, "text": "Both answered."},
  {"text": "ok", "repeat": true}
]}`)
	args := []string{"--config", writeConfig(t, dir, startGettime(t, nil)), "--model", "scripted:" + script,
		"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--max-subscriptions", "1"}
	// Parse the flags as rap serve does, then serve in-process.
	s, err := serveSettingsFor(args...)
	if err != nil {
		t.Fatalf("flags: %v", err)
	}
	if s.MaxSubscriptions != 1 {
		t.Fatalf("--max-subscriptions 1 parsed as %d", s.MaxSubscriptions)
	}
	info, _, _, _ := runningServe(t, s)
	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, info.URL)
	sendMessage(t, info.URL, th.ID, "two clocks please")
	msgs := waitAnswer(t, info.URL, th.ID, "Both answered.")
	var subscribed, refused int
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			switch {
			case r.Subscription && !r.IsError:
				subscribed++
			case r.IsError && strings.Contains(r.Text, "already has 1 active subscriptions"):
				refused++
			}
		}
	}
	if subscribed != 1 || refused != 1 {
		t.Fatalf("with --max-subscriptions 1: %d confirmed and %d refused subscriptions, want 1 and 1; history: %s", subscribed, refused, jsonString(msgs))
	}
}
