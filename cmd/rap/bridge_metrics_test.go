package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/toolsjson/weatherapi/api"
	"github.com/gorap/gorap/raptest"
)

// rap bridge toolsjson --metrics-listen serves the tool server's metrics
// (its invocations and results, labelled with the tool's name) and the
// Go process's at /metrics on that address, without a token.
func TestBridgeMetricsListen(t *testing.T) {
	clearRAPEnv(t)
	apiSrv := httptest.NewServer(api.Handler(demoKey))
	defer apiSrv.Close()
	dir := copyExampleBundle(t, apiSrv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"bridge", "toolsjson", dir, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "data"),
			"--no-confirm", "--metrics-listen", "127.0.0.1:0"}, stdout, stderr)
	}()
	var base, metricsURL string
	deadline := time.Now().Add(20 * time.Second)
	for base == "" || metricsURL == "" {
		out := stdout.String()
		if _, after, ok := strings.Cut(out, " on http://"); ok {
			if line, _, ok := strings.Cut(after, "\n"); ok {
				base = "http://" + line
			}
		}
		if _, after, ok := strings.Cut(out, "metrics at "); ok {
			metricsURL, _, _ = strings.Cut(after, " ")
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
	rt := raptest.NewRuntime()
	defer rt.Close()
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	c, err := rt.Invoke(cctx, base, "notes_echo", map[string]any{"note": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Result(cctx); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", metricsURL, resp.StatusCode)
	}
	for _, want := range []string{`gorap_toolserver_invocations_total{outcome="accepted",tool="notes_echo",toolset=`, `gorap_toolserver_results_total{outcome="ok",tool="notes_echo",toolset=`, "go_goroutines "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the metrics lack %s:\n%s", want, body)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("bridge exit %d\n%s", code, stderr)
	}
}
