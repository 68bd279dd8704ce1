package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// promScreenshot is one query of docs/observability.md shown in
// Prometheus's own graph page.
type promScreenshot struct {
	file, expr string
}

var promScreenshots = []promScreenshot{
	{"prometheus-threads-by-state", `sum by (state) (gorap_threads)`},
	{"prometheus-pending-calls-by-age", `sum by (older_than) (gorap_tool_calls_pending)`},
	{"prometheus-tool-invocations", `sum by (tool, outcome) (rate(gorap_tool_invocations_total[1m]))`},
	{"prometheus-completion-latency", `histogram_quantile(0.9, sum by (le) (rate(gorap_model_completion_duration_seconds_bucket[1m])))`},
}

// With GORAP_UPDATE_PROMETHEUS_SCREENSHOTS=1, this runs rap serve with
// the scripted model, the gettime example tool server and a tool that
// never answers, sends it traffic for about two minutes, scrapes it with
// Debian's prometheus configured from examples/observability (its
// prometheus.yml and rules.yml, the target and token file moved here),
// and writes docs/images/prometheus-*.png: the graph page of each query
// of promScreenshots, in headless Chromium. It needs the prometheus and
// chromium binaries (apt-get install prometheus chromium); it is skipped
// otherwise, and always without the variable.
func TestPrometheusScreenshots(t *testing.T) {
	if os.Getenv("GORAP_UPDATE_PROMETHEUS_SCREENSHOTS") != "1" {
		t.Skip("set GORAP_UPDATE_PROMETHEUS_SCREENSHOTS=1 to regenerate docs/images/prometheus-*.png")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("GORAP_UPDATE_PROMETHEUS_SCREENSHOTS=1 needs Prometheus: apt-get install prometheus")
	}
	browserBin := os.Getenv("GORAP_CHROMIUM")
	if browserBin == "" {
		if browserBin, err = exec.LookPath("chromium"); err != nil {
			t.Fatal("GORAP_UPDATE_PROMETHEUS_SCREENSHOTS=1 needs Chromium: apt-get install chromium, or set GORAP_CHROMIUM")
		}
	}
	clearRAPEnv(t)
	dir := t.TempDir()

	// A tool server whose tool never answers: its calls stay pending.
	stuck := rap.NewServer("reports", &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	type none struct{}
	rap.AddTool(stuck, &rap.Tool{Name: "export_report", Description: "exports a report (never answers)"}, func(ctx context.Context, _ *rap.Call, _ none) (*rap.Reply, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	stuckSrv := serveToolServer(t, stuck)
	// The model streams its words 120 ms apart: completions take about
	// a second, as a latency graph should show something.
	script := writeScript(t, dir, `{"stream_delay": "120ms", "turns": [
  {"when": {"user_contains": "Tokyo", "last_input": "user"}, "repeat": true, "tool_calls": [{"name": "get_time_in_zone", "arguments": {"timezone": "Asia/Tokyo"}}]},
  {"when": {"user_contains": "report", "last_input": "user"}, "repeat": true, "tool_calls": [{"name": "export_report", "arguments": {}}]},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}", "repeat": true},
  {"text": "ok", "repeat": true}
]}`)
	s := baseSettings(t, "scripted:"+script, writeConfig(t, dir, startGettime(t, nil), stuckSrv.URL))
	s.Token = "prometheus-screenshots-token-0123456789"
	info, _, _, stop := runningServe(t, s)
	defer stop()

	// Prometheus, from the example's configuration.
	conf, err := os.ReadFile(filepath.Join("..", "..", "examples", "observability", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join("..", "..", "examples", "observability", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(info.URL)
	c := strings.NewReplacer("/etc/prometheus/rap-token", filepath.Join(dir, "rap-token"), `"127.0.0.1:8080"`, `"`+u.Host+`"`,
		"scrape_interval: 30s", "scrape_interval: 2s", "evaluation_interval: 30s", "evaluation_interval: 2s").Replace(string(conf))
	if c == string(conf) {
		t.Fatal("examples/observability/prometheus.yml changed: the test no longer knows where to point it")
	}
	for name, data := range map[string]string{"prometheus.yml": c, "rules.yml": string(rules), "rap-token": s.Token} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := ln.Addr().String()
	ln.Close()
	prom := exec.Command(promBin, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "tsdb"),
		"--web.listen-address", promAddr)
	promLog, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	prom.Stdout, prom.Stderr = promLog, promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		prom.Process.Kill()
		prom.Wait()
	}()
	promURL := "http://" + promAddr
	pollFor(t, "Prometheus to scrape rap serve", 60*time.Second, func() bool {
		resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(`up{job="gorap"}`))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		return json.NewDecoder(resp.Body).Decode(&r) == nil && len(r.Data.Result) == 1 && r.Data.Result[0].Value[1] == "1"
	})

	// Traffic: answered calls, and calls left pending, over two minutes
	// (the store-wide gauges are counted every 30 s).
	cl := rapClient(t, info.URL, s.Token)
	end := time.Now().Add(2 * time.Minute)
	for i := 0; time.Now().Before(end); i++ {
		th, err := cl.CreateThread(context.Background(), api.CreateThreadRequest{})
		if err != nil {
			t.Fatal(err)
		}
		text := "Time in Tokyo?"
		if i%4 == 3 {
			text = "Export the report"
		}
		if _, err := cl.PostMessage(context.Background(), th.ID, text); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(500+(i%7)*300) * time.Millisecond) // the traffic's pace, not a wait for a result
	}

	b := promBrowser(t, browserBin, 1000, 1000)
	for _, shot := range promScreenshots {
		page := promURL + "/graph?g0.expr=" + url.QueryEscape(shot.expr) + "&g0.tab=0&g0.range_input=2m"
		ctx, cancel := context.WithTimeout(b, 60*time.Second)
		if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
			cancel()
			t.Fatalf("open %s: %v", page, err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector(".graph_area svg path, .graph svg path")`,
			chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			cancel()
			t.Fatalf("the graph of %s was not drawn: %v", shot.expr, err)
		}
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "docs", "images", shot.file+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(png) > 200<<10 {
			t.Errorf("%s is %d KB: keep it under 200 KB (a smaller viewport)", path, len(png)>>10)
		}
		t.Logf("wrote %s (%d KB)", path, len(png)>>10)
	}
}

// promBrowser starts headless Chromium with a w×h viewport and returns
// its context.
func promBrowser(t *testing.T, bin string, w, h int) context.Context {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Flag("headless", true),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(w, h))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser, which lives as long as its
	// context: bound the start from here, not with a deadline on it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.EmulateViewport(int64(w), int64(h))) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start within a minute", bin)
	}
	return ctx
}

// pollFor polls cond until it holds, failing after d.
func pollFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
