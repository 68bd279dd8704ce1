package observability

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/metrics"
)

// recorder registers on a registry and keeps what it registered.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqNameRe = regexp.MustCompile(`fqName: "([^"]+)"`)

// gorapMetrics returns the names of every metric the runtime (all of its
// metrics enabled: the gauges it reads at scrape time too) and a tool
// server of the rap SDK register, with the series names of each
// histogram (_bucket, _sum, _count).
func gorapMetrics(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	m, err := metrics.New(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(runtime.Watched{
		EventStreams: func() int { return 0 },
		Census: func(context.Context) (runtime.Census, bool, error) {
			return runtime.Census{}, true, nil
		},
	})
	rap.NewServer("example", &rap.ServerOptions{Metrics: rec})
	names := map[string]bool{}
	for _, c := range rec.collectors {
		var suffixes []string
		switch c.(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			suffixes = []string{"_bucket", "_sum", "_count"}
		}
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			sub := fqNameRe.FindStringSubmatch(d.String())
			if sub == nil {
				t.Fatalf("no name in the description %s", d)
			}
			names[sub[1]] = true
			for _, s := range suffixes {
				names[sub[1]+s] = true
			}
		}
	}
	for _, want := range []string{"gorap_threads", "gorap_event_streams_open", "gorap_slice_duration_seconds_bucket",
		"gorap_model_completion_duration_seconds_bucket", "gorap_toolserver_callback_deliveries_total", "gorap_toolserver_callbacks_queued"} {
		if !names[want] {
			t.Fatalf("the registered names lack %s: %v", want, slices.Sorted(maps.Keys(names)))
		}
	}
	return names
}

var metricNameRe = regexp.MustCompile(`gorap_[a-z_]+`)

// dashboardExprs returns the query of each target of each panel of the
// Grafana dashboard, and each panel's title.
func dashboardExprs(t *testing.T) (exprs, titles []string) {
	t.Helper()
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) < 4 {
		t.Fatalf("grafana-dashboard.json: title %q, uid %q, %d panels; want a titled dashboard with a uid and a handful of panels", d.Title, d.UID, len(d.Panels))
	}
	for _, p := range d.Panels {
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("a panel (title %q) has no title or no query", p.Title)
		}
		titles = append(titles, p.Title)
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: a target without a query or a refId", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs, titles
}

// Every gorap_ metric the alert rules and the dashboard's queries name is
// one gorap registers (the runtime with all its metrics, a tool server of
// the rap SDK): a renamed metric cannot leave a rule that never fires or
// a panel that stays empty. The scrape configuration loads rules.yml.
func TestExamplesNameOnlyMetricsThatExist(t *testing.T) {
	names := gorapMetrics(t)
	rules, err := os.ReadFile("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	exprs, _ := dashboardExprs(t)
	sources := map[string]string{"rules.yml": string(rules), "grafana-dashboard.json": strings.Join(exprs, "\n")}
	for file, text := range sources {
		used := metricNameRe.FindAllString(text, -1)
		if len(used) == 0 {
			t.Errorf("%s names no gorap_ metric", file)
		}
		for _, n := range used {
			if !names[n] {
				t.Errorf("%s names %s, which gorap does not register", file, n)
			}
		}
	}
	for _, alert := range []string{"GorapThreadsStuckOnTools", "GorapCompletionsFailing", "GorapLeaseTakeovers",
		"GorapCallbackDeliveriesFailing", "GorapDeadLettersGrowing"} {
		if !strings.Contains(string(rules), "alert: "+alert+"\n") {
			t.Errorf("rules.yml lacks the alert %s", alert)
		}
	}
	conf, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- rules.yml", "credentials_file:", "metrics_path: /metrics"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("prometheus.yml lacks %q", want)
		}
	}
}

// promtool returns the path of Prometheus's promtool, skipping the test
// when it is not installed (Debian: apt install prometheus) unless
// GORAP_REQUIRE_PROMTOOL=1.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("GORAP_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("GORAP_REQUIRE_PROMTOOL=1 but promtool is not installed (Debian: apt install prometheus)")
		}
		t.Skip("promtool is not installed (Debian: apt install prometheus); GORAP_REQUIRE_PROMTOOL=1 makes this a failure")
	}
	return p
}

// promtool accepts the alert rules, each query of the dashboard (as a
// recording rule of a file of its own): every expression parses; and the
// scrape configuration, with its token file where it says.
func TestPromtoolChecksRulesAndDashboardQueries(t *testing.T) {
	bin := promtool(t)
	check := func(file string) {
		t.Helper()
		out, err := exec.Command(bin, "check", "rules", file).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool check rules %s: %v\n%s", file, err, out)
		}
	}
	check("rules.yml")
	exprs, _ := dashboardExprs(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		b.WriteString("      - record: dashboard:query_" + strconv.Itoa(i) + "\n        expr: " + string(q) + "\n")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	check(file)

	// The configuration, in a directory of its own with the rules it
	// loads and its token file moved there.
	conf, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "rap-token")
	moved := strings.ReplaceAll(string(conf), "/etc/prometheus/rap-token", token)
	if moved == string(conf) {
		t.Fatal("prometheus.yml does not read the token from /etc/prometheus/rap-token")
	}
	for name, data := range map[string]string{"prometheus.yml": moved, "rules.yml": string(rules), "rap-token": "rap_example"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(bin, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "rules found") { // it loaded rules.yml
		t.Errorf("promtool check config prometheus.yml: %v\n%s", err, out)
	}
}
