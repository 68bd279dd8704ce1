package rap

// This file owns a Server's Prometheus metrics (ServerOptions.Metrics):
// invocations by answer, results by outcome and the time to them, callback
// deliveries by outcome, callbacks waiting for delivery and active
// subscriptions. Labels are the toolset's name, its tools' names and
// outcomes: never a call's, thread's or user's id.

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of the tool server metrics.
const (
	metricAccepted  = "accepted"  // invocation acknowledged (200)
	metricDuplicate = "duplicate" // the same call again, acknowledged
	metricInvalid   = "invalid"   // invocation refused as malformed (400)
	metricBusy      = "busy"      // invocation refused for now (503)
	metricOK        = "ok"
	metricError     = "error"
	// metricUnknownTool is the tool label of an operation the server does
	// not have: names a peer sends are not labels.
	metricUnknownTool = "_unknown"
)

// Callback delivery outcomes.
const (
	deliveryDelivered    = "delivered"
	deliveryRetried      = "retried"
	deliveryDeadLettered = "dead_lettered"
	deliveryGone         = "dropped_gone"
	deliveryReplaced     = "replaced_too_large"
)

// resultBuckets are the buckets of the time to a result, in seconds.
var resultBuckets = []float64{0.01, 0.05, 0.25, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}

// serverMetrics are one Server's metrics; the vectors are shared by every
// Server registered on one registry, told apart by their toolset label.
type serverMetrics struct {
	toolset     string
	invocations *prometheus.CounterVec
	results     *prometheus.CounterVec
	resultTime  *prometheus.HistogramVec
	deliveries  *prometheus.CounterVec

	mu     sync.RWMutex
	counts map[[3]string]prometheus.Counter // (metric, tool, outcome)
	times  map[string]prometheus.Observer   // by outcome
}

// registerShared registers c on reg, or returns the collector already
// registered under its description (another Server's on the same
// registry).
func registerShared[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// newServerMetrics registers the metrics of the server s on reg.
func newServerMetrics(reg prometheus.Registerer, s *Server) (*serverMetrics, error) {
	m := &serverMetrics{toolset: s.name, counts: map[[3]string]prometheus.Counter{}, times: map[string]prometheus.Observer{}}
	var err error
	if m.invocations, err = registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gorap_toolserver_invocations_total",
		Help: "Invocations a RAP tool server received, by toolset, tool (_unknown for an operation it does not have) and answer (accepted, duplicate: the same call again, invalid: a malformed invocation, busy: 503, retry later)."},
		[]string{"toolset", "tool", "outcome"})); err != nil {
		return nil, err
	}
	if m.results, err = registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gorap_toolserver_results_total",
		Help: "Tool results a RAP tool server produced (queued for delivery to the runtime), by toolset, tool and outcome (ok; error: an Error: result)."},
		[]string{"toolset", "tool", "outcome"})); err != nil {
		return nil, err
	}
	if m.resultTime, err = registerShared(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gorap_toolserver_result_seconds",
		Help: "Time from an invocation's acknowledgement to its result being queued for delivery, by toolset and outcome.", Buckets: resultBuckets},
		[]string{"toolset", "outcome"})); err != nil {
		return nil, err
	}
	if m.deliveries, err = registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gorap_toolserver_callback_deliveries_total",
		Help: "Attempts to deliver callbacks to runtimes, by toolset and outcome (delivered; retried: a failed attempt to be retried; dead_lettered: given up; dropped_gone: an event of a subscription the runtime ended; replaced_too_large: a result refused as too large, replaced by an error result)."},
		[]string{"toolset", "outcome"})); err != nil {
		return nil, err
	}
	labels := prometheus.Labels{"toolset": s.name}
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gorap_toolserver_callbacks_queued",
		Help: "Callbacks read from the outbox and not yet delivered (at most the delivery window, 16384; a durable outbox may hold more).", ConstLabels: labels},
		func() float64 { return float64(s.sender.queued.Load()) })
	subs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gorap_toolserver_subscriptions_active",
		Help: "Subscriptions running in a RAP tool server.", ConstLabels: labels},
		func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(s.nsubs)
		})
	for _, g := range []prometheus.Collector{queued, subs} {
		if err := reg.Register(g); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// counter returns the series named by k, made by with the first time.
func (m *serverMetrics) counter(k [3]string, with func() prometheus.Counter) prometheus.Counter {
	m.mu.RLock()
	c := m.counts[k]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c = m.counts[k]; c == nil {
		c = with()
		m.counts[k] = c
	}
	return c
}

// toolLabel is op as a label: its name when the server has the tool.
func (s *Server) toolLabel(op string) string {
	if _, ok := s.lookup(op); ok {
		return op
	}
	return metricUnknownTool
}

// countInvocation counts an invocation of op ("" when it could not be
// read) answered with outcome.
func (s *Server) countInvocation(op, outcome string) {
	if m := s.metrics; m != nil {
		tool := s.toolLabel(op)
		m.counter([3]string{"inv", tool, outcome}, func() prometheus.Counter {
			return m.invocations.WithLabelValues(m.toolset, tool, outcome)
		}).Inc()
	}
}

// countResult counts the result r of c, queued after the call was
// acknowledged at c.accepted (zero for a call answered after a restart).
func (s *Server) countResult(c *Call, r *ToolResult) {
	m := s.metrics
	if m == nil {
		return
	}
	outcome := metricOK
	if strings.HasPrefix(r.ModelText(), "Error:") {
		outcome = metricError
	}
	tool := s.toolLabel(c.Invocation.Operation)
	m.counter([3]string{"res", tool, outcome}, func() prometheus.Counter {
		return m.results.WithLabelValues(m.toolset, tool, outcome)
	}).Inc()
	if c.accepted.IsZero() {
		return
	}
	m.mu.RLock()
	o := m.times[outcome]
	m.mu.RUnlock()
	if o == nil {
		m.mu.Lock()
		if o = m.times[outcome]; o == nil {
			o = m.resultTime.WithLabelValues(m.toolset, outcome)
			m.times[outcome] = o
		}
		m.mu.Unlock()
	}
	o.Observe(time.Since(c.accepted).Seconds())
}

// countDelivery counts a delivery attempt's outcome.
func (s *Sender) countDelivery(outcome string) {
	if m := s.metrics; m != nil {
		m.counter([3]string{"del", "", outcome}, func() prometheus.Counter {
			return m.deliveries.WithLabelValues(m.toolset, outcome)
		}).Inc()
	}
}
