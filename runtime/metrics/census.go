package metrics

// This file owns the gauges read when the registry is scraped: the event
// streams open in this process, and the store-wide gauges counted from
// the store (runtime.Watched.Census), by one process only when several
// share the store.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/api"
)

// threadStates are the states gorap_threads reports, every one of them
// in each scrape (zero when no thread is in it).
var threadStates = []api.ThreadState{api.StateRunning, api.StateFailed, api.StateWaitingUser, api.StateWaitingTools,
	api.StateWaitingTimer, api.StateWaitingChildren, api.StateQuiet, api.StateClosed, api.StateMoving}

// Watch implements runtime.Metrics: it registers the gauges read at
// scrape time. A registration that fails (a second runtime given the same
// metrics) is logged and leaves those gauges out.
func (m *Runtime) Watch(w runtime.Watched) {
	if w.EventStreams != nil {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gorap_event_streams_open",
			Help: "Client event streams (GET /v1/threads/{id}/events) open in this process."},
			func() float64 { return float64(w.EventStreams()) })
		if err := m.reg.Register(g); err != nil {
			m.opts.Logger.Error("metrics: register gorap_event_streams_open", "err", err)
		}
	}
	if w.Census != nil {
		if err := m.reg.Register(newCensusCollector(m, w.Census)); err != nil {
			m.opts.Logger.Error("metrics: register the store-wide gauges", "err", err)
		}
	}
}

// censusCollector reports the store-wide gauges, counting the store at
// most every Options.CensusEvery.
type censusCollector struct {
	m      *Runtime
	census func(ctx context.Context) (runtime.Census, bool, error)

	threads, pending, waiting, exported *prometheus.Desc

	mu       sync.Mutex
	last     time.Time // when the last count was made
	c        runtime.Census
	isExport bool
	err      error
}

func newCensusCollector(m *Runtime, census func(ctx context.Context) (runtime.Census, bool, error)) *censusCollector {
	return &censusCollector{m: m, census: census,
		threads: prometheus.NewDesc("gorap_threads",
			"Threads of the store by state (the states of the client API's ThreadInfo.state), each counted once by its own state: a thread waiting only on its child threads is waiting_children, each child counted in its own. Store-wide: only the process with gorap_store_gauges_exported 1 reports it.",
			[]string{"state"}, nil),
		pending: prometheus.NewDesc("gorap_tool_calls_pending",
			"Tool calls waiting for their tool server's result (built-in tools left out) made at least older_than ago. Store-wide: only the process with gorap_store_gauges_exported 1 reports it.",
			[]string{"older_than"}, nil),
		waiting: prometheus.NewDesc("gorap_threads_with_pending_tool_calls",
			"Threads with a tool call waiting for its tool server's result made at least older_than ago. Store-wide: only the process with gorap_store_gauges_exported 1 reports it.",
			[]string{"older_than"}, nil),
		exported: prometheus.NewDesc("gorap_store_gauges_exported",
			"1 when this process reports the store-wide gauges (gorap_threads, gorap_tool_calls_pending, gorap_threads_with_pending_tool_calls), 0 when another process sharing the store does.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *censusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.threads
	ch <- c.pending
	ch <- c.waiting
	ch <- c.exported
}

// Collect implements prometheus.Collector.
func (c *censusCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.last.IsZero() || time.Since(c.last) >= c.m.opts.CensusEvery {
		ctx, cancel := context.WithTimeout(context.Background(), c.m.opts.CensusTimeout)
		c.c, c.isExport, c.err = c.census(ctx)
		cancel()
		c.last = time.Now()
		if c.err != nil {
			c.m.censusErrors.Inc()
			c.m.opts.Logger.Warn("metrics: count the store for the store-wide gauges", "err", c.err)
		}
	}
	cs, exported, err := c.c, c.isExport, c.err
	c.mu.Unlock()
	v := 0.0
	if exported {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(c.exported, prometheus.GaugeValue, v)
	if !exported || err != nil {
		return
	}
	if cs.Threads != nil {
		for _, s := range threadStates {
			ch <- prometheus.MustNewConstMetric(c.threads, prometheus.GaugeValue, float64(cs.Threads[s]), string(s))
		}
	}
	for i, age := range cs.Ages {
		label := ageLabel(age)
		if i < len(cs.PendingCalls) {
			ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(cs.PendingCalls[i]), label)
		}
		if i < len(cs.WaitingThreads) {
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(cs.WaitingThreads[i]), label)
		}
	}
}

// ageLabel writes an age as the older_than label: 0s, 1m, 10m, 1h, 24h.
func ageLabel(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
