package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The compaction table in docs/benchmarks.md and its chart are what the
// figures in compaction.csv make: editing either file by hand, or the
// figures without running the generator, fails here.
func TestGeneratedDocsAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	md, svg, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	cycles, err := generateCycles()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{benchmarksMD: md, chartSVG: svg, cyclesSVG: cycles} {
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date with the figures in internal/benchplot: run go generate ./internal/benchplot and commit it", path)
		}
	}
}

// The chart is well-formed XML with a white background, a point per row
// and series, and each series' last figure written beside its line.
func TestChartDrawsEveryFigure(t *testing.T) {
	rows, err := parseRows(compactionCSV)
	if err != nil {
		t.Fatal(err)
	}
	svg := chart(rows)
	elements, texts := readSVG(t, svg)
	circles := elements["circle"]
	if want := 2*len(rows) + 2; circles != want { // two legend markers
		t.Errorf("the chart has %d points, want %d", circles, want)
	}
	last := rows[len(rows)-1]
	for _, s := range []string{group(last.whole), group(last.compacted), "without compaction", "with compaction"} {
		if !texts[s] {
			t.Errorf("the chart lacks the text %q", s)
		}
	}
	if !bytes.Contains(svg, []byte(`<rect width="100%" height="100%" fill="#fff"/>`)) {
		t.Error("the chart has no white background")
	}
}

// Figures that cannot be drawn are refused with the column that is wrong.
func TestParseRowsRefusesBadFigures(t *testing.T) {
	head := strings.Join(header, ",") + "\n"
	for _, tc := range []struct{ csv, want string }{
		{head + "10,520,520,,1 ms\n100,x,5200,,1 ms\n", "whole_tokens"},
		{head + "10,520,520,,1 ms\n10,5200,5200,,1 ms\n", "messages must grow"},
		{head + "10,520,0,,1 ms\n100,5200,5200,,1 ms\n", "compacted_tokens"},
		{"messages,whole,compacted,summary,time\n10,520,520,,1 ms\n100,5200,5200,,1 ms\n", "want the header"},
		{head + "10,520,520\n", "wrong number of fields"},
	} {
		if _, err := parseRows(tc.csv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRows(%q) = %v, want an error naming %q", tc.csv, err, tc.want)
		}
	}
}

func TestGroupSeparatesThousands(t *testing.T) {
	for n, want := range map[int]string{7: "7", 520: "520", 5200: "5,200", 76008: "76,008", 5200000: "5,200,000"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
}

// The cycles chart is well-formed XML with a dot per run, a line per
// runtime through its medians, and each runtime's last median written
// beside its line.
func TestCyclesChartDrawsEveryRun(t *testing.T) {
	runs, err := parseRuns(harnessCSV)
	if err != nil {
		t.Fatal(err)
	}
	elements, texts := readSVG(t, cyclesChart(runs))
	circles, lines := elements["circle"], elements["polyline"]
	if want := len(runs) + len(runtimes); circles != want { // a legend marker per runtime
		t.Errorf("the chart has %d points, want %d", circles, want)
	}
	if lines != len(runtimes) {
		t.Errorf("the chart has %d lines, want %d", lines, len(runtimes))
	}
	for _, s := range runtimes {
		threads, rate := medians(runs, s.key)
		last := group(int(math.Round(rate[len(threads)-1])))
		if !texts[last] || !texts[s.name] {
			t.Errorf("the chart lacks %q or the last median %s of %s", s.name, last, s.key)
		}
	}
}

// The median of an even number of runs is the mean of the middle two.
func TestMediansOfRuns(t *testing.T) {
	runs := []harnessRun{{16, "peer", 300}, {16, "peer", 100}, {16, "peer", 200}, {128, "peer", 400}, {128, "peer", 500}, {128, "gorap", 9}}
	threads, rate := medians(runs, "peer")
	if !slices.Equal(threads, []int{16, 128}) || !slices.Equal(rate, []float64{200, 450}) {
		t.Errorf("medians = %v %v, want [16 128] [200 450]", threads, rate)
	}
}

// Runs that cannot be drawn are refused with the column that is wrong.
func TestParseRunsRefusesBadFigures(t *testing.T) {
	head := strings.Join(runHeader, ",") + "\n"
	for _, tc := range []struct{ csv, want string }{
		{head + "16,gorap,x\n", "cycles_per_s"},
		{head + "0,gorap,10\n", "threads"},
		{head + "16,langgraph,10\n", "want gorap or peer"},
		{"threads,who,rate\n16,gorap,10\n", "want the header"},
	} {
		if _, err := parseRuns(tc.csv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRuns(%q) = %v, want an error naming %q", tc.csv, err, tc.want)
		}
	}
}

// readSVG parses a chart, failing the test when it is not well-formed
// XML, and returns how many elements of each name it holds and its texts.
func readSVG(t *testing.T, svg []byte) (elements map[string]int, texts map[string]bool) {
	t.Helper()
	elements, texts = map[string]int{}, map[string]bool{}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return elements, texts
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elements[tok.Name.Local]++
		case xml.CharData:
			texts[strings.TrimSpace(string(tok))] = true
		}
	}
}
