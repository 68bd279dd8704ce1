package promtest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sum adds the series whose labels include the ones asked for, counts a
// histogram's observations, and says -1 for a series that is not there.
func TestSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total", Help: "h"}, []string{"tool", "outcome"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wait_seconds", Help: "h"})
	reg.MustRegister(c, h)
	c.WithLabelValues("a", "ok").Add(2)
	c.WithLabelValues("a", "failed").Add(1)
	c.WithLabelValues("b", "ok").Add(5)
	h.Observe(1)
	h.Observe(2)
	fams := Gather(t, reg)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"calls_total", []string{"tool", "a", "outcome", "ok"}, 2},
		{"calls_total", []string{"tool", "a"}, 3},
		{"calls_total", nil, 8},
		{"calls_total", []string{"tool", "c"}, -1},
		{"wait_seconds", nil, 2},
		{"absent_total", nil, -1},
	} {
		if got := fams.Sum(tc.name, tc.labels...); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	parsed, err := Parse(strings.NewReader("# TYPE up gauge\nup{job=\"x\"} 1\n"))
	if err != nil || parsed.Sum("up", "job", "x") != 1 {
		t.Errorf("Parse: %v, up = %v", err, parsed.Sum("up", "job", "x"))
	}
}
