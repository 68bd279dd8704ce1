package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	weatherapi "github.com/gorap/gorap/examples/toolsjson/weatherapi/api"
	"github.com/gorap/gorap/internal/promtest"
)

// getMetrics GETs url with token ("" for none) and returns the status
// and body.
func getMetrics(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// rap serve serves /metrics on its address only with the client token,
// and, with --metrics-listen, on that address without one; the
// metrics are the runtime's and the Go process's.
func TestServeMetrics(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir, startGettime(t, nil)))
	s.Token = "metrics-test-token-0123456789"
	s.MetricsListen = "127.0.0.1:0"
	info, stdout, _, stop := runningServe(t, s)
	defer stop()
	if status, _ := getMetrics(t, info.URL+"/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token = %d, want 401", status)
	}
	if status, _ := getMetrics(t, info.URL+"/metrics", "wrong-token-0123456789"); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics with a wrong token = %d, want 401", status)
	}
	for _, c := range []struct{ url, token string }{{info.URL + "/metrics", s.Token}, {info.MetricsURL, ""}} {
		status, body := getMetrics(t, c.url, c.token)
		if status != http.StatusOK {
			t.Errorf("GET %s (token %q) = %d, want 200: %s", c.url, c.token, status, body)
			continue
		}
		for _, want := range []string{"gorap_store_gauges_exported 1", `gorap_threads{state="quiet"} 0`, "gorap_event_streams_open 0", "go_goroutines "} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %q", c.url, want)
			}
		}
	}
	if !strings.HasPrefix(info.MetricsURL, "http://127.0.0.1:") || strings.HasSuffix(info.MetricsURL, ":0/metrics") {
		t.Errorf("MetricsURL = %q, want the bound loopback address", info.MetricsURL)
	}
	if out := stdout.String(); !strings.Contains(out, info.MetricsURL+" WITHOUT a token") {
		t.Errorf("the startup lines do not show the metrics address:\n%s", out)
	}
	// Only /metrics is served there: not the client API.
	if status, _ := getMetrics(t, strings.TrimSuffix(info.MetricsURL, "/metrics")+"/v1/threads", ""); status != http.StatusNotFound {
		t.Errorf("GET /v1/threads on the metrics address = %d, want 404", status)
	}
}

// The tool servers rap serve runs in process for its config (here an
// http_mcp_server and a tools_json entry) count on serve's own /metrics:
// the invocations and results of each, by toolset, tool and outcome (no
// other label), and their callback deliveries, next to the runtime's
// metrics. The body is read with Prometheus's text parser.
func TestServeMetricsOfInProcessBridges(t *testing.T) {
	clearRAPEnv(t)
	apiSrv := httptest.NewServer(weatherapi.Handler(demoKey))
	defer apiSrv.Close()
	dir := t.TempDir()
	bundle := copyExampleBundle(t, apiSrv.URL)
	t.Setenv("DEMO_WEATHER_API_KEY", demoKey)
	cfg := filepath.Join(dir, "rap.json")
	data := fmt.Sprintf(`{"tool_sets": [
		{"type": "http_mcp_server", "name": "echoer", "url": %q},
		{"type": "tools_json", "bundle": %q}
	]}`, newBridgeTestMCP(t), bundle)
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, dir, `{"turns": [
  {"when": {"user_contains": "Echo", "last_input": "user"}, "repeat": true, "tool_calls": [{"name": "echoer_echo", "arguments": {"text": "hello from MCP"}}]},
  {"when": {"user_contains": "note", "last_input": "user"}, "repeat": true, "tool_calls": [{"name": "notes_echo", "arguments": {"note": "buy milk"}}]},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}", "repeat": true},
  {"text": "ok", "repeat": true}
]}`)
	s := baseSettings(t, "scripted:"+script, cfg)
	s.MetricsListen = "127.0.0.1:0"
	info, _, _, stop := runningServe(t, s)
	defer stop()
	id := createThread(t, info.URL)
	sendMessage(t, info.URL, id, "Echo please")
	waitAnswer(t, info.URL, id, "Result: hello from MCP")
	sendMessage(t, info.URL, id, "note this")
	waitAnswer(t, info.URL, id, `Result: {"note":"buy milk"}`)

	status, body := getMetrics(t, info.MetricsURL, "")
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d", info.MetricsURL, status)
	}
	fams, err := promtest.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v", err)
	}
	// count sums the series of name whose labels include want.
	count := func(name string, want map[string]string) float64 {
		var labels []string
		for k, v := range want {
			labels = append(labels, k, v)
		}
		return max(fams.Sum(name, labels...), 0)
	}
	for _, tool := range []string{"echoer_echo", "notes_echo"} {
		if n := count("gorap_toolserver_invocations_total", map[string]string{"tool": tool, "outcome": "accepted"}); n != 1 {
			t.Errorf("gorap_toolserver_invocations_total{tool=%q,outcome=accepted} = %v, want 1", tool, n)
		}
		if n := count("gorap_toolserver_results_total", map[string]string{"tool": tool, "outcome": "ok"}); n != 1 {
			t.Errorf("gorap_toolserver_results_total{tool=%q,outcome=ok} = %v, want 1", tool, n)
		}
		if n := count("gorap_tool_invocations_total", map[string]string{"tool": tool, "outcome": "accepted"}); n != 1 {
			t.Errorf("the runtime's gorap_tool_invocations_total{tool=%q,outcome=accepted} = %v, want 1", tool, n)
		}
	}
	if n := count("gorap_toolserver_callback_deliveries_total", map[string]string{"outcome": "delivered"}); n < 2 {
		t.Errorf("callback deliveries delivered = %v, want at least 2 (one result per bridge)", n)
	}
	toolsets := map[string]bool{}
	for _, name := range []string{"gorap_toolserver_invocations_total", "gorap_toolserver_results_total", "gorap_toolserver_callback_deliveries_total", "gorap_toolserver_callbacks_queued"} {
		f := fams[name]
		if f == nil {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "toolset":
					toolsets[l.GetValue()] = true
				case "tool", "outcome":
				default:
					t.Errorf("%s has the label %s=%q: want toolset, tool and outcome only", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	if len(toolsets) != 2 {
		t.Errorf("the toolset labels %v: want one per bridged entry", toolsets)
	}
	if _, ok := fams["gorap_threads"]; !ok {
		t.Error("the runtime's metrics are missing")
	}
}
