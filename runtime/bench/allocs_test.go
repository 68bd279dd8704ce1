package bench

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateAllocBaseline = flag.Bool("update-alloc-baseline", false, "write the measured allocations per cycle to testdata/alloc-baseline.json")

// allocBaseline is the committed figure the allocation guard compares with.
type allocBaseline struct {
	Threads        int     `json:"threads"`
	Cycles         int64   `json:"cycles"`
	AllocsPerCycle float64 `json:"allocs_per_cycle"`
	Note           string  `json:"note"`
}

// allocGrowthLimit is how much the heap allocations of a cycle may grow
// over the committed baseline before the guard fails.
const allocGrowthLimit = 1.20

// The heap allocations of a runtime cycle (a result POSTed, the durable
// append, an instant scripted completion, the next call dispatched: the
// cycle of rap bench-runtime with the scripted model) stay within 20 % of
// the committed baseline. Allocations, unlike time, hardly depend on the
// machine's load (548 ± 1 per cycle over four runs at a load average of 8),
// so this is the one speed figure a test guards. A change that allocates
// less should lower the baseline: go test ./runtime/bench -run
// TestAllocationsPerCycle -update-alloc-baseline.
func TestAllocationsPerCycle(t *testing.T) {
	path := filepath.Join("testdata", "alloc-baseline.json")
	var base allocBaseline
	if !*updateAllocBaseline {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading the baseline: %v (write it with -update-alloc-baseline)", err)
		}
		if err := json.Unmarshal(raw, &base); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	} else {
		base = allocBaseline{Threads: 8, Cycles: 2000}
	}
	rep, err := RunCycles(context.Background(), CycleOptions{
		Threads: base.Threads, Cycles: base.Cycles, Duration: 5 * time.Minute, Warmup: 300 * time.Millisecond, DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failures != 0 {
		t.Fatalf("%d results were not delivered; the first: %s", rep.Failures, rep.FirstFailure)
	}
	t.Logf("%.1f allocations (%.1f KB) per cycle over %d cycles; baseline %.1f", rep.AllocsPerCycle, rep.AllocBytesPerCycle/1024, rep.Cycles, base.AllocsPerCycle)
	if *updateAllocBaseline {
		base.AllocsPerCycle = float64(int(rep.AllocsPerCycle*10+0.5)) / 10
		base.Note = "heap allocations per cycle of RunCycles with the scripted model; the guard fails above 1.2 times this figure"
		raw, _ := json.MarshalIndent(base, "", "  ")
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if limit := base.AllocsPerCycle * allocGrowthLimit; rep.AllocsPerCycle > limit {
		t.Errorf("a cycle allocates %.1f objects, over 1.2 × the baseline's %.1f: find the new allocations (rap bench-runtime --memprofile FILE, then go tool pprof -sample_index=alloc_objects FILE), or raise the baseline with -update-alloc-baseline if they are worth it",
			rep.AllocsPerCycle, base.AllocsPerCycle)
	}
	if rep.AllocsPerCycle < base.AllocsPerCycle/allocGrowthLimit {
		t.Logf("a cycle allocates well under the baseline: lower it with -update-alloc-baseline so that the guard keeps the gain")
	}
}
