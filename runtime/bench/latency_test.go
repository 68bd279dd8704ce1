package bench

import (
	"context"
	"testing"
)

// The latency harness plays its rounds and collects one sample of each
// kind per round. (The figures are measured, never asserted.)
func TestRunLatency(t *testing.T) {
	rep, err := RunLatency(context.Background(), LatencyOptions{Threads: 3, Rounds: 4, DataDir: t.TempDir(), Stages: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FirstDelta.N != 12 || rep.CallbackToModel.N != 12 || rep.FirstDelta.P50 <= 0 || rep.CallbackToModel.P50 <= 0 {
		t.Errorf("implausible report:\n%s", rep)
	}
	if len(rep.Stages) != len(callbackStages) {
		t.Fatalf("%d stages, want %d", len(rep.Stages), len(callbackStages))
	}
	for _, st := range rep.Stages {
		if st.N != 12 {
			t.Errorf("stage %q has %d samples, want one per round (12): the spans were not matched", st.Name, st.N)
		}
	}
	t.Logf("\n%s", rep)
}
