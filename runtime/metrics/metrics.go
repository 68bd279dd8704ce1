// Package metrics defines the runtime's Prometheus metrics on a registry
// it is given: Runtime implements runtime.Metrics, so that a runtime
// made with it (runtime.Config.Metrics) counts its completions, slices,
// tool invocations, callbacks, store transactions and the rest, and its
// store-wide gauges (threads by state, pending calls by age) are read from
// the store when the registry is scraped. docs/observability.md lists
// every metric.
//
// Labels take values from small sets only: outcomes, states, model,
// toolset and tool names; never the id of a thread, a call or a user.
// Library code never touches Prometheus's default registry.
package metrics

// This file owns the Runtime's metrics and what it does with each call of
// the runtime; census.go the gauges read at scrape time.

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime"
)

// Options configure New. The zero value (or nil) takes the defaults.
type Options struct {
	// CensusEvery is how often, at most, the store is counted for the
	// store-wide gauges: a scrape sooner than that after the last count
	// gets the same figures. Zero means DefaultCensusEvery.
	CensusEvery time.Duration
	// CensusTimeout bounds one count of the store; zero means
	// DefaultCensusTimeout.
	CensusTimeout time.Duration
	// Logger receives a warning when a count of the store fails; nil
	// means slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultCensusEvery   = 30 * time.Second
	DefaultCensusTimeout = 10 * time.Second
)

// maxToolSeries bounds the (toolset, tool) pairs the tool metrics keep
// series for; past it, new pairs are counted under the tool name
// overflowTool.
const maxToolSeries = 2000

// overflowTool is the tool label of the tools past maxToolSeries.
const overflowTool = "_other"

// Runtime is the runtime's metrics on one registry; it implements
// runtime.Metrics. Give it to one runtime.
type Runtime struct {
	opts Options

	completions  *cache[completionKey, prometheus.Counter]
	completionD  *cache[completionKey, prometheus.Observer]
	tokens       *cache[modelKey, *tokenCounters]
	cost         *cache[modelKey, prometheus.Counter]
	slices       *cache[string, prometheus.Counter]
	sliceD       prometheus.Observer
	invocations  *cache[toolKey, prometheus.Counter]
	ackD         *cache[string, prometheus.Observer]
	resultD      *cache[toolKey, prometheus.Observer]
	callbacks    *cache[[2]string, prometheus.Counter]
	events       *cache[string, prometheus.Counter]
	compactions  *cache[[2]string, prometheus.Counter]
	moves        *cache[[2]string, prometheus.Counter]
	txD          *cache[string, prometheus.Observer]
	txRetries    *cache[string, prometheus.Counter]
	txErrors     *cache[string, prometheus.Counter]
	censusErrors prometheus.Counter
	reg          prometheus.Registerer
}

var _ runtime.Metrics = (*Runtime)(nil)

type completionKey struct{ model, purpose, outcome string }
type modelKey struct{ model string }
type toolKey struct{ toolset, tool, outcome string }

// tokenCounters are one model's token counters by kind.
type tokenCounters struct{ input, cacheRead, cacheWrite, output prometheus.Counter }

// Buckets of the histograms, in seconds.
var (
	completionBuckets = []float64{0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600}
	sliceBuckets      = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300}
	ackBuckets        = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	resultBuckets     = []float64{0.05, 0.25, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600}
	txBuckets         = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// New defines the runtime's metrics on reg and returns them; it fails
// when reg already has metrics of the same names. opts may be nil.
func New(reg prometheus.Registerer, opts *Options) (*Runtime, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CensusEvery <= 0 {
		o.CensusEvery = DefaultCensusEvery
	}
	if o.CensusTimeout <= 0 {
		o.CensusTimeout = DefaultCensusTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := &Runtime{opts: o, reg: reg}
	var vecs []prometheus.Collector
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		vecs = append(vecs, v)
		return v
	}
	histVec := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		vecs = append(vecs, v)
		return v
	}

	completions := counterVec("gorap_model_completions_total",
		"Model completions that ended, by provider, model, purpose (turn: a thread's turn; compaction: a summary by gorap's compaction) and outcome (ok, error, prompt_too_long, idle_timeout, timeout, cancelled).",
		"provider", "model", "purpose", "outcome")
	m.completions = newCache(0, func(k completionKey) prometheus.Counter {
		p, n := splitModel(k.model)
		return completions.WithLabelValues(p, n, k.purpose, k.outcome)
	})
	completionD := histVec("gorap_model_completion_duration_seconds",
		"Duration of model completions, failed ones included, by provider, model, purpose and outcome.",
		completionBuckets, "provider", "model", "purpose", "outcome")
	m.completionD = newCache(0, func(k completionKey) prometheus.Observer {
		p, n := splitModel(k.model)
		return completionD.WithLabelValues(p, n, k.purpose, k.outcome)
	})
	tokens := counterVec("gorap_model_tokens_total",
		"Tokens of model completions as their provider reported them, by provider, model and kind: input (processed without the prompt cache), cache_read, cache_write and output; the first three add up to every input token.",
		"provider", "model", "kind")
	m.tokens = newCache(0, func(k modelKey) *tokenCounters {
		p, n := splitModel(k.model)
		return &tokenCounters{input: tokens.WithLabelValues(p, n, "input"), cacheRead: tokens.WithLabelValues(p, n, "cache_read"),
			cacheWrite: tokens.WithLabelValues(p, n, "cache_write"), output: tokens.WithLabelValues(p, n, "output")}
	})
	cost := counterVec("gorap_model_cost_dollars_total",
		"What model completions cost in US dollars at the runtime's prices (rap.json \"prices\" over the list prices gorap knows), by provider and model; models without a known price are not counted.",
		"provider", "model")
	m.cost = newCache(0, func(k modelKey) prometheus.Counter {
		p, n := splitModel(k.model)
		return cost.WithLabelValues(p, n)
	})
	slices := counterVec("gorap_slices_total",
		"Slices of threads that did something, by outcome (ok; failed: the slice returned an error, its input stays queued; lost: the thread's lease was lost to another process).",
		"outcome")
	m.slices = newCache(0, func(o string) prometheus.Counter { return slices.WithLabelValues(o) })
	sliceD := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gorap_slice_duration_seconds",
		Help: "Duration of slices: loading a thread's input, its completions and the commits of its turns.", Buckets: sliceBuckets})
	vecs = append(vecs, sliceD)
	m.sliceD = sliceD
	invocations := counterVec("gorap_tool_invocations_total",
		"Invocations of tools sent to tool servers, by toolset, tool and outcome (accepted: a 2xx answer; refused: a 4xx answer; failed: no answer or a 5xx after the retries).",
		"toolset", "tool", "outcome")
	m.invocations = newCache(maxToolSeries, func(k toolKey) prometheus.Counter {
		return invocations.WithLabelValues(k.toolset, k.tool, k.outcome)
	})
	m.invocations.other = func(k toolKey) toolKey { return toolKey{k.toolset, overflowTool, k.outcome} }
	ackD := histVec("gorap_tool_invocation_ack_seconds",
		"Time from the start of a dispatch to the tool server's answer (retries included), by toolset.",
		ackBuckets, "toolset")
	m.ackD = newCache(0, func(ts string) prometheus.Observer { return ackD.WithLabelValues(ts) })
	resultD := histVec("gorap_tool_result_seconds",
		"Time from a tool call being saved and dispatched to its result being accepted from the tool's callback, by toolset and outcome (ok, error: an Error: result).",
		resultBuckets, "toolset", "outcome")
	m.resultD = newCache(0, func(k toolKey) prometheus.Observer { return resultD.WithLabelValues(k.toolset, k.outcome) })
	callbacks := counterVec("gorap_callbacks_total",
		"Callbacks tools posted, by message type (tool_result, subscription_event, view_update, oauth, user_choice, user_input; unknown when the token was refused or the body could not be read) and answer (accepted, duplicate, ignored, invalid, forbidden, unknown_call, gone, deferred, failed).",
		"type", "answer")
	m.callbacks = newCache(0, func(k [2]string) prometheus.Counter { return callbacks.WithLabelValues(k[0], k[1]) })
	events := counterVec("gorap_subscription_events_total",
		"Subscription events accepted, by how they were handled (child_thread, inline, held: waiting for the tool_result that confirms the subscription).",
		"handling")
	m.events = newCache(0, func(h string) prometheus.Counter { return events.WithLabelValues(h) })
	compactions := counterVec("gorap_compactions_total",
		"Compactions of threads' histories, by who compacted (gorap, provider) and outcome (ok, error).",
		"by", "outcome")
	m.compactions = newCache(0, func(k [2]string) prometheus.Counter { return compactions.WithLabelValues(k[0], k[1]) })
	moves := counterVec("gorap_session_moves_total",
		"Sessions moved between runtimes, by direction (out, in) and outcome (moved, failed, aborted).",
		"direction", "outcome")
	m.moves = newCache(0, func(k [2]string) prometheus.Counter { return moves.WithLabelValues(k[0], k[1]) })
	txD := histVec("gorap_store_transaction_duration_seconds",
		"Duration of store transactions as the engine waits for them (queueing, retries and the sync of a write included), by kind (update, view, quick_view).",
		txBuckets, "kind")
	m.txD = newCache(0, func(k string) prometheus.Observer { return txD.WithLabelValues(k) })
	txRetries := counterVec("gorap_store_transaction_retries_total",
		"Store transactions run again: a conflict (PostgreSQL serialization failure or deadlock) or another write of the same SQLite group failing, by kind.",
		"kind")
	m.txRetries = newCache(0, func(k string) prometheus.Counter { return txRetries.WithLabelValues(k) })
	txErrors := counterVec("gorap_store_transaction_errors_total",
		"Store transactions that returned an error (the engine's own refusals included), by kind.",
		"kind")
	m.txErrors = newCache(0, func(k string) prometheus.Counter { return txErrors.WithLabelValues(k) })
	m.censusErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "gorap_store_census_errors_total",
		Help: "Counts of the store for the store-wide gauges that failed (the gauges are then left out of that scrape)."})
	vecs = append(vecs, m.censusErrors)
	for _, c := range vecs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Handler serves the metrics of g (a *prometheus.Registry) in the
// Prometheus text format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// splitModel splits a runtime model name "provider:model" in two.
func splitModel(name string) (provider, model string) {
	if p, m, ok := strings.Cut(name, ":"); ok {
		return p, m
	}
	return "", name
}

// Completion implements runtime.Metrics.
func (m *Runtime) Completion(c runtime.CompletionStats) {
	k := completionKey{c.Model, c.Purpose, c.Outcome}
	m.completions.get(k).Inc()
	m.completionD.get(k).Observe(c.Took.Seconds())
	u := c.Usage
	if u != (model.Usage{}) {
		t := m.tokens.get(modelKey{c.Model})
		t.input.Add(float64(max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0)))
		t.cacheRead.Add(float64(max(u.CachedInputTokens, 0)))
		t.cacheWrite.Add(float64(max(u.CacheWriteInputTokens, 0)))
		t.output.Add(float64(max(u.OutputTokens, 0)))
	}
	if c.Priced && c.Cost > 0 {
		m.cost.get(modelKey{c.Model}).Add(c.Cost)
	}
}

// Slice implements runtime.Metrics.
func (m *Runtime) Slice(outcome string, took time.Duration) {
	m.slices.get(outcome).Inc()
	m.sliceD.Observe(took.Seconds())
}

// Invocation implements runtime.Metrics.
func (m *Runtime) Invocation(toolset, tool, outcome string, took time.Duration) {
	m.invocations.get(toolKey{toolset, tool, outcome}).Inc()
	m.ackD.get(toolset).Observe(took.Seconds())
}

// ToolResult implements runtime.Metrics.
func (m *Runtime) ToolResult(toolset, _, outcome string, took time.Duration) {
	m.resultD.get(toolKey{toolset: toolset, outcome: outcome}).Observe(took.Seconds())
}

// Callback implements runtime.Metrics.
func (m *Runtime) Callback(kind, answer string) { m.callbacks.get([2]string{kind, answer}).Inc() }

// SubscriptionEvent implements runtime.Metrics.
func (m *Runtime) SubscriptionEvent(handling string) { m.events.get(handling).Inc() }

// Compaction implements runtime.Metrics.
func (m *Runtime) Compaction(by, outcome string) { m.compactions.get([2]string{by, outcome}).Inc() }

// SessionMove implements runtime.Metrics.
func (m *Runtime) SessionMove(direction, outcome string) {
	m.moves.get([2]string{direction, outcome}).Inc()
}

// StoreTx implements runtime.Metrics.
func (m *Runtime) StoreTx(kind string, took time.Duration, attempts int, failed bool) {
	m.txD.get(kind).Observe(took.Seconds())
	if attempts > 1 {
		m.txRetries.get(kind).Add(float64(attempts - 1))
	}
	if failed {
		m.txErrors.get(kind).Inc()
	}
}
