package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

var (
	rapBinOnce sync.Once
	rapBinPath string
	rapBinErr  error
)

// buildRapBinary builds the rap command once per test run into a
// temporary directory and returns its path.
func buildRapBinary(t testing.TB) string {
	t.Helper()
	rapBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rap-e2e-bin-")
		if err != nil {
			rapBinErr = err
			return
		}
		rapBinPath = filepath.Join(dir, "rap")
		out, err := exec.Command("go", "build", "-o", rapBinPath, ".").CombinedOutput()
		if err != nil {
			rapBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if rapBinErr != nil {
		t.Fatal(rapBinErr)
	}
	return rapBinPath
}

// servedProcess is a "rap serve" subprocess.
type servedProcess struct {
	cmd    *exec.Cmd
	URL    string // the listen URL it printed
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{}
}

// lockedBuffer is a bytes.Buffer safe for one writer and many readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe runs "rap serve" with args and env (added to the test's
// environment) and waits until it prints its listen URL.
func startServe(t testing.TB, bin string, env []string, args ...string) *servedProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p := &servedProcess{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(p.stdout, pw)
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "rap serve: listening on "); ok {
				urls <- u
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case p.URL = <-urls:
	case <-p.done:
		t.Fatalf("rap serve exited before listening:\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("rap serve did not print its URL within 60s:\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	return p
}

// stop sends SIGINT and waits for a graceful exit.
func (p *servedProcess) stop(t testing.TB) {
	t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("rap serve did not stop within 30s of SIGINT\nstderr:\n%s", p.stderr)
	}
}

// rapClient returns a client of the runtime's API at base, sending token
// when not empty.
func rapClient(t testing.TB, base, token string) *client.Client {
	t.Helper()
	c, err := client.New(base, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createThread creates a thread over the client API and returns its id.
func createThread(t testing.TB, base string) string {
	t.Helper()
	th, err := rapClient(t, base, "").CreateThread(context.Background(), api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return th.ID
}

// sendMessage sends a user message over the client API.
func sendMessage(t testing.TB, base, thread, text string) {
	t.Helper()
	if _, err := rapClient(t, base, "").PostMessage(context.Background(), thread, text); err != nil {
		t.Fatal(err)
	}
}

// getHistory reads a thread's history over the client API.
func getHistory(t testing.TB, base, thread string) []api.Message {
	t.Helper()
	msgs, err := rapClient(t, base, "").History(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestServeAnthropicEndToEnd runs the rap binary against a local server
// speaking the Anthropic Messages API: the model calls a tool of a
// configured RAP server and answers from its result.
func TestServeAnthropicEndToEnd(t *testing.T) {
	bin := buildRapBinary(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	tools := gettime.New(nil)
	if err := tools.Start(ctx); err != nil {
		t.Fatal(err)
	}
	toolSrv := httptest.NewServer(tools)
	defer toolSrv.Close()

	const apiKey = "sk-ant-dummy-e2e-key-0123456789"
	llm := wiretest.NewAnthropic(wiretest.CallToolThenAnswer("get_time_in_zone", json.RawMessage(`{"timezone":"Asia/Tokyo"}`)))
	llm.RequireAPIKey(apiKey)
	defer llm.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"tool_sets": [{"type": "toolset_server", "server_url": %q}]}`, toolSrv.URL)), 0o644)

	p := startServe(t, bin,
		[]string{"ANTHROPIC_BASE_URL=" + llm.URL, "ANTHROPIC_API_KEY=" + apiKey, "RAP_MODEL=", "RAP_TOKEN="},
		"--listen", "127.0.0.1:0", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--model", "anthropic:test-model")
	defer p.stop(t)

	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, p.URL)
	sendMessage(t, p.URL, th.ID, "What time is it in Tokyo?")

	var msgs []api.Message
	deadline := time.Now().Add(45 * time.Second)
	for {
		msgs = getHistory(t, p.URL, th.ID)
		if n := len(msgs); n > 0 && msgs[n-1].Role == api.RoleAssistant && strings.Contains(msgs[n-1].Text, "The tool answered") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no final answer within 45s; history: %s\nstderr:\n%s", jsonString(msgs), p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The model's tool call, the RAP tool's result, and the answer that quotes it.
	var call *api.ToolCall
	var result *api.ToolResult
	for i := range msgs {
		for j := range msgs[i].ToolCalls {
			if msgs[i].ToolCalls[j].Name == "get_time_in_zone" {
				call = &msgs[i].ToolCalls[j]
			}
		}
		for j := range msgs[i].ToolResults {
			if call != nil && msgs[i].ToolResults[j].CallID == call.ID {
				result = &msgs[i].ToolResults[j]
			}
		}
	}
	if call == nil {
		t.Fatalf("history has no get_time_in_zone call: %s", jsonString(msgs))
	}
	if string(call.Arguments) != `{"timezone":"Asia/Tokyo"}` {
		t.Errorf("call arguments = %s", call.Arguments)
	}
	if result == nil || result.IsError {
		t.Fatalf("history has no successful result for call %s: %s", call.ID, jsonString(msgs))
	}
	resultText := result.Text
	if !strings.Contains(resultText, "+09:00") {
		t.Errorf("Tokyo result %q has no +09:00 offset", resultText)
	}
	final := msgs[len(msgs)-1].Text
	if !strings.Contains(final, strings.TrimSpace(resultText)) {
		t.Errorf("final answer %q does not contain the tool's result %q", final, resultText)
	}

	// What the model saw: the RAP tool offered, then its result.
	reqs := llm.Requests()
	if len(reqs) < 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	if reqs[0].Model != "test-model" {
		t.Errorf("model id sent = %q, want test-model", reqs[0].Model)
	}
	offered := false
	for _, tool := range reqs[0].Tools {
		offered = offered || tool.Name == "get_time_in_zone"
	}
	if !offered {
		t.Errorf("get_time_in_zone was not offered to the model: %+v", reqs[0].Tools)
	}
	if got := reqs[len(reqs)-1].ToolResults(); len(got) != 1 || got[0].CallID != call.ID {
		t.Errorf("last request's tool results = %+v, want the result of %s", got, call.ID)
	}
	if !strings.Contains(p.stdout.String(), "model:        anthropic:test-model") {
		t.Errorf("rap serve should print the model in use; stdout:\n%s", p.stdout)
	}
	// "test-model" is in no table: the default window, said at start.
	if !strings.Contains(p.stdout.String(), "context:      128000 tokens; a tool result is sent to the model with at most 12800") ||
		!strings.Contains(p.stderr.String(), "context window is unknown") {
		t.Errorf("rap serve should print the context window and log that it is unknown; stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	// Secrets never reach the logs.
	if strings.Contains(p.stderr.String(), apiKey) || strings.Contains(p.stdout.String(), apiKey) {
		t.Errorf("the API key appears in rap serve's output")
	}
}

func jsonString(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
