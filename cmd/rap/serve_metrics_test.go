package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
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
