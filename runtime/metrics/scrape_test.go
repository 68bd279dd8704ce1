package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorap/gorap/internal/promtest"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/metrics"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// awaitSample scrapes url until the series of name with labels
// satisfies ok, failing after waitFor with the last value seen.
func awaitSample(t *testing.T, url, what string, ok func(float64) bool, name string, labels ...string) float64 {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		v := promtest.Scrape(t, url).Sum(name, labels...)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v after %v: want %s", name, labels, v, waitFor, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func equals(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool {
	return func(v float64) bool { return v >= want }
}

// flakyToolServer is a RAP tool server of the SDK, its metrics served
// over HTTP, behind a front that can refuse its invocations (503): the
// tool echo answers at once, the subscription watch emits what the test
// sends it.
type flakyToolServer struct {
	url, metricsURL string
	refuse          atomic.Bool
	events          chan string
}

func newFlakyToolServer(t *testing.T) *flakyToolServer {
	t.Helper()
	f := &flakyToolServer{events: make(chan string, 16)}
	reg := prometheus.NewRegistry()
	srv := rap.NewServer("flaky", &rap.ServerOptions{Metrics: reg, Logger: slog.New(slog.DiscardHandler),
		Retry: rap.RetryPolicy{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}})
	type none struct{}
	rap.AddTool(srv, &rap.Tool{Name: "echo", Description: "answers at once"}, func(context.Context, *rap.Call, none) (*rap.Reply, error) {
		return rap.Text("echoed"), nil
	})
	rap.AddSubscription(srv, &rap.Tool{Name: "watch", Description: "events the test sends"}, func(ctx context.Context, sub *rap.Subscription, _ none) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case text := <-f.events:
				if err := sub.Emit(ctx, text); err != nil {
					return err
				}
			}
		}
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && f.refuse.Load() {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	ms := httptest.NewServer(metrics.Handler(reg))
	f.url, f.metricsURL = front.URL, ms.URL+"/metrics"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		srv.Shutdown(ctx)
		front.Close()
		ms.Close()
	})
	return f
}

// A conversation scraped at /metrics, on the runtime and on its tool
// server, the bodies read with Prometheus's text parser: a tool server
// refusing invocations counts them failed in the runtime; callbacks the
// runtime cannot take count as retried deliveries in the tool server and
// leave the call pending in the runtime until one is delivered; a
// subscription counts its active subscription and its events on both
// sides. Every value is polled with a deadline.
func TestScrapedMetricsOfAFailingToolServerAndASubscription(t *testing.T) {
	tools := newFlakyToolServer(t)
	var failCallbacks atomic.Bool
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	g := newRigFull(t, st, rigOptions{toolServers: []string{tools.url}, front: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if failCallbacks.Load() && strings.HasPrefix(r.URL.Path, runtime.CallbackPath) {
				http.Error(w, "down for the test", http.StatusBadGateway)
				return
			}
			next.ServeHTTP(w, r)
		})
	}})
	rt, ts := g.url+"/metrics", tools.metricsURL

	// Refused invocations: the runtime counts the dispatch failed, the
	// thread goes on with the error, the tool server saw nothing.
	tools.refuse.Store(true)
	refused := g.thread(t, "call echo")
	g.waitState(t, refused, api.StateQuiet)
	awaitSample(t, rt, "1", equals(1), "gorap_tool_invocations_total", "toolset", "flaky", "tool", "echo", "outcome", "failed")
	awaitSample(t, ts, "no invocation", func(v float64) bool { return v <= 0 }, "gorap_toolserver_invocations_total", "tool", "echo")
	tools.refuse.Store(false)

	// Callbacks failing: the tool server retries, the runtime keeps the
	// call pending; once they pass, the result is delivered and accepted.
	failCallbacks.Store(true)
	late := g.thread(t, "call echo")
	awaitSample(t, ts, "1", equals(1), "gorap_toolserver_invocations_total", "toolset", "flaky", "tool", "echo", "outcome", "accepted")
	awaitSample(t, ts, "1", equals(1), "gorap_toolserver_results_total", "toolset", "flaky", "tool", "echo", "outcome", "ok")
	awaitSample(t, ts, "at least 2 retried attempts", atLeast(2), "gorap_toolserver_callback_deliveries_total", "toolset", "flaky", "outcome", "retried")
	awaitSample(t, rt, "1 pending call", equals(1), "gorap_tool_calls_pending", "older_than", "0s")
	awaitSample(t, rt, "1 thread waiting on tools", equals(1), "gorap_threads", "state", "waiting_tools")
	awaitSample(t, ts, "none delivered", func(v float64) bool { return v <= 0 }, "gorap_toolserver_callback_deliveries_total", "outcome", "delivered")
	failCallbacks.Store(false)
	awaitSample(t, ts, "1 delivered", equals(1), "gorap_toolserver_callback_deliveries_total", "toolset", "flaky", "outcome", "delivered")
	g.waitState(t, late, api.StateQuiet)
	awaitSample(t, rt, "no pending call", equals(0), "gorap_tool_calls_pending", "older_than", "0s")
	awaitSample(t, rt, "1 result", equals(1), "gorap_tool_result_seconds", "toolset", "flaky", "outcome", "ok")
	awaitSample(t, rt, "1 accepted", equals(1), "gorap_callbacks_total", "type", "tool_result", "answer", "accepted")
	awaitSample(t, ts, "0 dead letters", func(v float64) bool { return v <= 0 }, "gorap_toolserver_callback_deliveries_total", "outcome", "dead_lettered")

	// A subscription: confirmed (a second tool_result accepted), active
	// in the tool server, its events delivered and accepted.
	g.thread(t, "call watch")
	awaitSample(t, ts, "1 active", equals(1), "gorap_toolserver_subscriptions_active", "toolset", "flaky")
	awaitSample(t, rt, "2 accepted", equals(2), "gorap_callbacks_total", "type", "tool_result", "answer", "accepted")
	for i := range 3 {
		tools.events <- fmt.Sprintf("event %d", i)
	}
	awaitSample(t, rt, "3 events", equals(3), "gorap_subscription_events_total")
	awaitSample(t, rt, "3 accepted", equals(3), "gorap_callbacks_total", "type", "subscription_event", "answer", "accepted")
	// Two results and three events delivered.
	awaitSample(t, ts, "5 delivered", equals(5), "gorap_toolserver_callback_deliveries_total", "toolset", "flaky", "outcome", "delivered")
	awaitSample(t, ts, "empty", equals(0), "gorap_toolserver_callbacks_queued", "toolset", "flaky")
	awaitSample(t, rt, "2 invocations accepted", equals(2), "gorap_tool_invocations_total", "toolset", "flaky", "outcome", "accepted")
}
