// Command benchplot writes the compaction benchmark's table in
// docs/benchmarks.md and its chart, docs/images/compaction-tokens.svg, from
// the figures in compaction.csv, and the chart of runtime cycles per second
// against threads, docs/images/cycles-by-threads.svg, from harness.csv:
// "go generate ./internal/benchplot" after changing a figure.
// TestGeneratedDocsAreCurrent fails when a file differs from what the
// figures make.
package main

//go:generate go run .

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed compaction.csv
var compactionCSV string

//go:embed harness.csv
var harnessCSV string

// The files written, relative to the module root.
const (
	benchmarksMD = "docs/benchmarks.md"
	chartSVG     = "docs/images/compaction-tokens.svg"
	cyclesSVG    = "docs/images/cycles-by-threads.svg"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	md, svg, err := generate(root)
	if err != nil {
		return err
	}
	cycles, err := generateCycles()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, chartSVG), svg, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, cyclesSVG), cycles, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, benchmarksMD), md, 0o644)
}

// generate returns docs/benchmarks.md with its generated part rewritten,
// and the chart, as the figures in compaction.csv make them.
func generate(root string) (md, svg []byte, err error) {
	rows, err := parseRows(compactionCSV)
	if err != nil {
		return nil, nil, fmt.Errorf("compaction.csv: %w", err)
	}
	old, err := os.ReadFile(filepath.Join(root, benchmarksMD))
	if err != nil {
		return nil, nil, err
	}
	md, err = splice(old, markdown(rows))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", benchmarksMD, err)
	}
	return md, chart(rows), nil
}

// generateCycles returns the chart of cycles per second against threads
// that the figures in harness.csv make.
func generateCycles() ([]byte, error) {
	runs, err := parseRuns(harnessCSV)
	if err != nil {
		return nil, fmt.Errorf("harness.csv: %w", err)
	}
	return cyclesChart(runs), nil
}

// moduleRoot is the nearest directory at or above the working directory
// that holds go.mod, so that the command runs from anywhere in the module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod here or above: run this inside the gorap module")
		}
		dir = parent
	}
}
