package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gorap/gorap/internal/promtest"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/metrics"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

const waitFor = 10 * time.Second

// usageModel calls the tool the user names ("call TOOL"), then answers
// once the result is in; every completion reports the same usage.
type usageModel struct{}

var turnUsage = model.Usage{InputTokens: 100, CachedInputTokens: 30, CacheWriteInputTokens: 20, OutputTokens: 7}

func (usageModel) Name() string         { return "testprov:tiny-1" }
func (usageModel) SupportsImages() bool { return false }
func (usageModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	resp := &model.Response{Usage: turnUsage}
	if tool, ok := strings.CutPrefix(last.Text, "call "); ok && len(last.ToolResults) == 0 {
		resp.ToolCalls = []model.ToolCall{{ID: "c-" + tool, Name: tool, Arguments: json.RawMessage(`{}`)}}
		return resp, nil
	}
	resp.Text = "done"
	return resp, nil
}

// toolServer serves a manifest of three tools and records the
// invocations; "refused" is answered 400, the others 200, and the test
// posts their results.
type toolServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	invs    map[string]rap.Invocation // by tool
	invoked chan string
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{invs: map[string]rap.Invocation{}, invoked: make(chan string, 10)}
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == rap.WellKnownPath {
			var tools []rap.Tool
			for _, n := range []string{"fast", "slow", "refused"} {
				tools = append(tools, rap.Tool{Name: n, Description: "test tool " + n, InputSchema: rap.EmptyObjectSchema})
			}
			json.NewEncoder(w).Encode(rap.Toolset{Name: "testtools", Endpoint: ts.srv.URL + "/invoke", Tools: tools})
			return
		}
		body, _ := io.ReadAll(r.Body)
		inv, err := rap.DecodeInvocation(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if inv.Operation == "refused" {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		ts.mu.Lock()
		ts.invs[inv.Operation] = *inv
		ts.mu.Unlock()
		ts.invoked <- inv.Operation
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

// invocation waits for the invocation of tool.
func (ts *toolServer) invocation(t *testing.T, tool string) rap.Invocation {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		ts.mu.Lock()
		inv, ok := ts.invs[tool]
		ts.mu.Unlock()
		if ok {
			return inv
		}
		select {
		case <-ts.invoked:
		case <-deadline:
			t.Fatalf("no invocation of %s arrived", tool)
		}
	}
}

// post sends a callback and returns its status.
func post(t *testing.T, url string, msg any) int {
	t.Helper()
	b, _ := json.Marshal(msg)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// rig is a runtime on SQLite with metrics on a registry of its own.
type rig struct {
	rt   *runtime.Runtime
	reg  *prometheus.Registry
	url  string
	tool *toolServer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	return newRigOn(t, st)
}

// newRigOn is newRig on st, which it closes at the end of the test.
func newRigOn(t *testing.T, st store.Store) *rig {
	t.Helper()
	return newRigWith(t, st, nil)
}

// newRigWith is newRigOn with the client API behind auth.
func newRigWith(t *testing.T, st store.Store, auth func(http.Handler) http.Handler) *rig {
	t.Helper()
	return newRigFull(t, st, rigOptions{auth: auth})
}

// rigOptions are the optional parts of a rig.
type rigOptions struct {
	auth        func(http.Handler) http.Handler // the client API's authentication
	toolServers []string                        // besides the rig's own tool server
	front       func(http.Handler) http.Handler // wraps the runtime's handler
}

// newRigFull is newRigOn with opts.
func newRigFull(t *testing.T, st store.Store, opts rigOptions) *rig {
	t.Helper()
	g := &rig{reg: prometheus.NewRegistry(), tool: newToolServer(t)}
	m, err := metrics.New(g.reg, &metrics.Options{CensusEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	secret, err := runtime.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	g.rt, err = runtime.New(&runtime.Config{Store: st, Model: usageModel{}, ToolServers: append([]string{g.tool.srv.URL}, opts.toolServers...), PublicURL: srv.URL,
		Secret: secret, Logger: slog.New(slog.DiscardHandler), Metrics: m, MetricsHandler: metrics.Handler(g.reg),
		DefaultUserID: "user-7f3a", DispatchRetry: runtime.RetryPolicy{Initial: time.Millisecond, Attempts: 1},
		Prices:     map[string]model.Price{"tiny-1": {Input: 1, CacheRead: 0.5, CacheWrite: 2, Output: 10}},
		ClientAuth: opts.auth})
	if err != nil {
		t.Fatal(err)
	}
	handler = g.rt.Handler()
	if opts.front != nil {
		handler = opts.front(handler)
	}
	if err := g.rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		g.rt.Shutdown(ctx)
		st.Close()
	})
	return g
}

// thread creates a thread and posts text to it.
func (g *rig) thread(t *testing.T, text string) string {
	t.Helper()
	id, err := g.rt.CreateThread(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.rt.PostMessage(context.Background(), id, text); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitState waits until the thread is in state s.
func (g *rig) waitState(t *testing.T, id string, s api.ThreadState) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		info, err := g.rt.ThreadInfo(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == s {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s is %s, want %s", id, info.State, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// value returns the value of the series of name whose labels include
// labels (name=value pairs), summed over the series that match, or -1 when
// there is none: a counter's or gauge's value, a histogram's count.
func (g *rig) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return promtest.Gather(t, g.reg).Sum(name, labels...)
}

func (g *rig) want(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	if got := g.value(t, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// A conversation with an asynchronous tool moves the metrics: its
// completions with their tokens and cost, the invocations by outcome,
// the callbacks by type and answer, the time to the result, the slices
// and store transactions; the store-wide gauges count the threads by
// state and the pending calls while one waits.
func TestRuntimeMetricsOfAConversation(t *testing.T) {
	g := newRig(t)

	// A thread whose call waits: counted waiting on tools, its call
	// pending.
	waiting := g.thread(t, "call slow")
	slow := g.tool.invocation(t, "slow")
	g.waitState(t, waiting, api.StateWaitingTools)
	g.want(t, 1, "gorap_threads", "state", "waiting_tools")
	g.want(t, 1, "gorap_tool_calls_pending", "older_than", "0s")
	g.want(t, 0, "gorap_tool_calls_pending", "older_than", "1m")
	g.want(t, 1, "gorap_threads_with_pending_tool_calls", "older_than", "0s")
	g.want(t, 1, "gorap_store_gauges_exported")

	// A thread whose call is answered: two completions, one
	// invocation accepted, one result.
	done := g.thread(t, "call fast")
	fast := g.tool.invocation(t, "fast")
	if st := post(t, fast.CallbackURL, rap.ToolResult{GroupID: fast.GroupID, ID: fast.ID, Text: "42"}); st != http.StatusOK {
		t.Fatalf("result: status %d", st)
	}
	g.waitState(t, done, api.StateQuiet)
	// The same result again is a duplicate; a forged token is refused.
	if st := post(t, fast.CallbackURL, rap.ToolResult{GroupID: fast.GroupID, ID: fast.ID, Text: "42"}); st != http.StatusOK {
		t.Fatalf("duplicate result: status %d", st)
	}
	if st := post(t, g.url+runtime.CallbackPath+"forged", rap.ToolResult{GroupID: fast.GroupID, ID: fast.ID, Text: "42"}); st != http.StatusForbidden {
		t.Fatalf("forged token: status %d", st)
	}
	// A call its tool server refuses.
	refused := g.thread(t, "call refused")
	g.waitState(t, refused, api.StateQuiet)

	g.want(t, 1, "gorap_tool_invocations_total", "toolset", "testtools", "tool", "fast", "outcome", "accepted")
	g.want(t, 1, "gorap_tool_invocations_total", "toolset", "testtools", "tool", "slow", "outcome", "accepted")
	g.want(t, 1, "gorap_tool_invocations_total", "toolset", "testtools", "tool", "refused", "outcome", "refused")
	g.want(t, 3, "gorap_tool_invocation_ack_seconds", "toolset", "testtools")
	g.want(t, 1, "gorap_tool_result_seconds", "toolset", "testtools", "outcome", "ok")
	g.want(t, 1, "gorap_callbacks_total", "type", "tool_result", "answer", "accepted")
	g.want(t, 1, "gorap_callbacks_total", "type", "tool_result", "answer", "duplicate")
	g.want(t, 1, "gorap_callbacks_total", "type", "unknown", "answer", "forbidden")
	// Completions: one per thread asking for the tool, and one answer for
	// each of the two threads whose call ended.
	g.want(t, 5, "gorap_model_completions_total", "provider", "testprov", "model", "tiny-1", "purpose", "turn", "outcome", "ok")
	g.want(t, 5, "gorap_model_completion_duration_seconds", "provider", "testprov", "model", "tiny-1", "outcome", "ok")
	g.want(t, 5*50, "gorap_model_tokens_total", "model", "tiny-1", "kind", "input")
	g.want(t, 5*30, "gorap_model_tokens_total", "model", "tiny-1", "kind", "cache_read")
	g.want(t, 5*20, "gorap_model_tokens_total", "model", "tiny-1", "kind", "cache_write")
	g.want(t, 5*7, "gorap_model_tokens_total", "model", "tiny-1", "kind", "output")
	wantCost := 5 * (50*1 + 30*0.5 + 20*2 + 7*10) / 1e6
	if got := g.value(t, "gorap_model_cost_dollars_total", "model", "tiny-1"); fmt.Sprintf("%.9f", got) != fmt.Sprintf("%.9f", wantCost) {
		t.Errorf("cost = %v, want %v", got, wantCost)
	}
	if n := g.value(t, "gorap_slices_total", "outcome", "ok"); n < 5 {
		t.Errorf("gorap_slices_total{outcome=ok} = %v, want at least 5 (one per completion)", n)
	}
	if n := g.value(t, "gorap_store_transaction_duration_seconds", "kind", "update"); n < 5 {
		t.Errorf("store updates timed: %v, want at least 5", n)
	}
	g.want(t, 2, "gorap_threads", "state", "quiet")
	g.want(t, 1, "gorap_threads", "state", "waiting_tools")
	g.want(t, 0, "gorap_threads", "state", "running")

	// The waiting call's result: the thread is quiet, nothing is pending.
	if st := post(t, slow.CallbackURL, rap.ToolResult{GroupID: slow.GroupID, ID: slow.ID, Text: "late"}); st != http.StatusOK {
		t.Fatalf("result: status %d", st)
	}
	g.waitState(t, waiting, api.StateQuiet)
	g.want(t, 3, "gorap_threads", "state", "quiet")
	g.want(t, 0, "gorap_threads", "state", "waiting_tools")
	g.want(t, 0, "gorap_tool_calls_pending", "older_than", "0s")
	g.want(t, 2, "gorap_tool_result_seconds", "toolset", "testtools", "outcome", "ok")
	g.want(t, 0, "gorap_event_streams_open")

	// No label carries an id of a thread, a call or a user.
	ids := []string{waiting, done, refused, slow.ID, fast.ID, "c-slow", "c-fast", "user-7f3a"}
	checkNoIDs(t, g.reg, ids)
}

// checkNoIDs fails when a label value of any series of reg holds one of
// ids.
func checkNoIDs(t *testing.T, reg prometheus.Gatherer, ids []string) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				for _, id := range ids {
					if id != "" && strings.Contains(l.GetValue(), id) {
						t.Errorf("%s{%s=%q} carries the id %s", f.GetName(), l.GetName(), l.GetValue(), id)
					}
				}
			}
		}
	}
	if series < 20 {
		t.Errorf("only %d series gathered: the check saw too little", series)
	}
}

// Every metric has help text, follows Prometheus' naming rules, and the
// registry lints clean.
func TestRuntimeMetricsLint(t *testing.T) {
	g := newRig(t)
	id := g.thread(t, "call fast")
	inv := g.tool.invocation(t, "fast")
	post(t, inv.CallbackURL, rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, Text: "ok"})
	g.waitState(t, id, api.StateQuiet)
	problems, err := testutil.GatherAndLint(g.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	fams, _ := g.reg.Gather()
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "gorap_") || f.GetHelp() == "" {
			t.Errorf("metric %s: want the gorap_ prefix and help text (help %q)", f.GetName(), f.GetHelp())
		}
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(f.GetName(), "_total") {
			t.Errorf("counter %s does not end in _total", f.GetName())
		}
	}
}

// GET /metrics on the runtime's handler serves the registry to the
// client API's callers; without client authentication, to this
// machine only (the test's requests come from loopback).
func TestRuntimeServesMetrics(t *testing.T) {
	g := newRig(t)
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "gorap_store_gauges_exported 1") {
		t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
}

// On a store several processes share, one process reports the
// store-wide gauges: the first to be scraped takes the metrics lease,
// and the other reports gorap_store_gauges_exported 0 and no gauge of
// the store while that lease lives, so that sums over the processes
// count the store once.
func TestStoreGaugesFromOneProcess(t *testing.T) {
	url := pgtest.URL(t)
	open := func() store.Store {
		st, err := postgres.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	a, b := newRigOn(t, open()), newRigOn(t, open())
	if _, err := a.rt.CreateThread(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.want(t, 1, "gorap_store_gauges_exported")
	a.want(t, 1, "gorap_threads", "state", "quiet")
	a.want(t, 0, "gorap_tool_calls_pending", "older_than", "0s")
	b.want(t, 0, "gorap_store_gauges_exported")
	b.want(t, -1, "gorap_threads", "state", "quiet")
	b.want(t, -1, "gorap_tool_calls_pending", "older_than", "0s")
	// A later scrape of the holder renews its lease; the other still
	// leaves the gauges out.
	a.want(t, 1, "gorap_store_gauges_exported")
	b.want(t, 0, "gorap_store_gauges_exported")

	// A conversation with a tool on the shared store, its transactions
	// timed: the holder counts the other's thread too.
	id := b.thread(t, "call fast")
	inv := b.tool.invocation(t, "fast")
	if st := post(t, inv.CallbackURL, rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, Text: "ok"}); st != http.StatusOK {
		t.Fatalf("result: status %d", st)
	}
	b.waitState(t, id, api.StateQuiet)
	// Either process may have run a slice (the other's sweep can take a
	// thread nobody holds): count over both.
	both := func(name string, labels ...string) float64 {
		return max(a.value(t, name, labels...), 0) + max(b.value(t, name, labels...), 0)
	}
	if n := both("gorap_model_completions_total", "outcome", "ok"); n != 2 {
		t.Errorf("completions over both processes = %v, want 2", n)
	}
	if n := both("gorap_callbacks_total", "type", "tool_result", "answer", "accepted"); n != 1 {
		t.Errorf("results accepted over both processes = %v, want 1", n)
	}
	a.want(t, 2, "gorap_threads", "state", "quiet")
}

// Reporting an event to the metrics allocates nothing once its series
// exists.
func TestRuntimeMetricsDoNotAllocate(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := runtime.CompletionStats{Model: "testprov:tiny-1", Purpose: runtime.PurposeTurn, Outcome: runtime.CompletionOK,
		Took: time.Second, Usage: turnUsage, Cost: 0.01, Priced: true}
	events := func() {
		m.Completion(c)
		m.Slice(runtime.SliceOK, time.Millisecond)
		m.Invocation("tools", "fast", runtime.InvocationAccepted, time.Millisecond)
		m.ToolResult("tools", "fast", runtime.ResultOK, time.Second)
		m.Callback("tool_result", runtime.CallbackAccepted)
		m.SubscriptionEvent(runtime.EventInline)
		m.StoreTx(runtime.TxUpdate, time.Millisecond, 2, false)
	}
	events()
	if n := testing.AllocsPerRun(100, events); n != 0 {
		t.Errorf("reporting allocates %v times per round, want 0", n)
	}
}

// Behind client authentication, GET /metrics answers the callers it
// lets through that are not bound to one user; a caller bound to a user
// gets 403, since the metrics count every user's sessions.
func TestMetricsNeedAnAdminCaller(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Header.Get("Authorization") {
			case "Bearer admin":
				next.ServeHTTP(w, r.WithContext(api.WithCaller(r.Context(), api.Caller{Admin: true})))
			case "Bearer alice":
				next.ServeHTTP(w, r.WithContext(api.WithCaller(r.Context(), api.Caller{UserID: "alice"})))
			default:
				http.Error(w, "no", http.StatusUnauthorized)
			}
		})
	}
	g := newRigWith(t, st, auth)
	for token, want := range map[string]int{"": http.StatusUnauthorized, "alice": http.StatusForbidden, "admin": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, g.url+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /metrics with token %q = %d, want %d", token, resp.StatusCode, want)
		}
	}
}
