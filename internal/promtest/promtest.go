// Package promtest reads Prometheus metrics in tests: gathered from a
// registry, or scraped and parsed from the text format as Prometheus
// itself reads it.
package promtest

import (
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
)

// Families are metric families by name.
type Families map[string]*dto.MetricFamily

// Parse parses the Prometheus text format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// Scrape GETs url and parses its body; anything but a 200 answer with a
// body in the text format fails the test.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	fams, err := Parse(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: the body does not parse as the Prometheus text format: %v", url, err)
	}
	return fams
}

// Gather returns what g gathers, failing the test on an error.
func Gather(t testing.TB, g prometheus.Gatherer) Families {
	t.Helper()
	list, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := make(Families, len(list))
	for _, f := range list {
		fams[f.GetName()] = f
	}
	return fams
}

// Sum returns the sum, over the series of name whose labels include labels
// (name=value pairs), of a counter's, gauge's or untyped value or a
// histogram's count; -1 when no series matches.
func (fams Families) Sum(name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	sum, found := 0.0, false
series:
	for _, m := range f.GetMetric() {
		have := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue series
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	if !found {
		return -1
	}
	return sum
}
