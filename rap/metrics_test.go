package rap_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gorap/gorap/internal/promtest"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// metricValue returns the value of the series of name with the labels
// (name=value pairs) on reg, summed over the series that match, or -1 when
// there is none; a histogram's count.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	return promtest.Gather(t, reg).Sum(name, labels...)
}

// waitMetric polls until the series has the value want.
func waitMetric(t *testing.T, reg prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := metricValue(t, reg, name, labels...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v, want %v", name, labels, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A tool server with ServerOptions.Metrics counts its invocations by
// answer, its results by outcome with the time to them, and its callback
// deliveries; the callbacks waiting for delivery go back to zero; an
// operation it does not have is labelled _unknown; no label holds an id.
// Two servers share one registry, told apart by their toolset label.
func TestServerMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	newServer := func(name string) string {
		s := rap.NewServer(name, &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler), Metrics: reg})
		rap.AddTool(s, &rap.Tool{Name: "greet", Description: "Greets."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			return rap.Text("hello"), nil
		})
		rap.AddTool(s, &rap.Tool{Name: "fail", Description: "Fails."}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			return nil, errors.New("it broke")
		})
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(context.Background()) })
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	url := newServer("greeter")
	other := newServer("other")
	rt := raptest.NewRuntime()
	defer rt.Close()
	var ids []string
	for _, c := range []struct {
		url, op string
		opts    []raptest.InvokeOption
	}{{url, "greet", nil}, {url, "fail", nil}, {url, "nope", []raptest.InvokeOption{raptest.Unchecked()}}, {other, "greet", nil}} {
		call, err := rt.Invoke(ctx, c.url, c.op, struct{}{}, append(c.opts, raptest.InThread("thread-5d1e"), raptest.WithUserID("user-9b2c"))...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := call.Result(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, call.Invocation.ID)
	}
	resp, err := http.Post(url+"/invoke", "application/json", strings.NewReader(`{"not":"an invocation"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	want := func(v float64, name string, labels ...string) {
		t.Helper()
		if got := metricValue(t, reg, name, labels...); got != v {
			t.Errorf("%s%v = %v, want %v", name, labels, got, v)
		}
	}
	want(1, "gorap_toolserver_invocations_total", "toolset", "greeter", "tool", "greet", "outcome", "accepted")
	want(1, "gorap_toolserver_invocations_total", "toolset", "greeter", "tool", "fail", "outcome", "accepted")
	want(1, "gorap_toolserver_invocations_total", "toolset", "greeter", "tool", "_unknown", "outcome", "accepted")
	want(1, "gorap_toolserver_invocations_total", "toolset", "greeter", "tool", "_unknown", "outcome", "invalid")
	want(1, "gorap_toolserver_invocations_total", "toolset", "other", "tool", "greet", "outcome", "accepted")
	want(1, "gorap_toolserver_results_total", "toolset", "greeter", "tool", "greet", "outcome", "ok")
	want(1, "gorap_toolserver_results_total", "toolset", "greeter", "tool", "fail", "outcome", "error")
	want(1, "gorap_toolserver_results_total", "toolset", "greeter", "tool", "_unknown", "outcome", "error")
	want(1, "gorap_toolserver_result_seconds", "toolset", "greeter", "outcome", "ok")
	want(2, "gorap_toolserver_result_seconds", "toolset", "greeter", "outcome", "error")
	waitMetric(t, reg, 3, "gorap_toolserver_callback_deliveries_total", "toolset", "greeter", "outcome", "delivered")
	waitMetric(t, reg, 0, "gorap_toolserver_callbacks_queued", "toolset", "greeter")
	want(0, "gorap_toolserver_subscriptions_active", "toolset", "greeter")

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
	fams, _ := reg.Gather()
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, id := range append(ids, "thread-5d1e", "user-9b2c") {
					if strings.Contains(l.GetValue(), id) {
						t.Errorf("%s{%s=%q} carries the id %s", f.GetName(), l.GetName(), l.GetValue(), id)
					}
				}
			}
		}
	}
}

// Without ServerOptions.Metrics a server registers nothing anywhere.
func TestServerWithoutMetrics(t *testing.T) {
	before, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := rap.NewServer("quiet", &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	after, _ := prometheus.DefaultGatherer.Gather()
	for _, f := range after {
		if strings.HasPrefix(f.GetName(), "gorap_") {
			t.Errorf("the default registry has %s", f.GetName())
		}
	}
	if len(after) != len(before) {
		t.Errorf("the default registry went from %d to %d families", len(before), len(after))
	}
}
