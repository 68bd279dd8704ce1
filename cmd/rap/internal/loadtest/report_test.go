package loadtest

import (
	"testing"
	"time"
)

// The other load is the machine's busy time less the measured processes'
// own, per second of the run, and never negative (the machine's figure is
// sampled per clock tick and may fall short of the process's exact one).
func TestOtherLoadIsTheRestOfTheMachine(t *testing.T) {
	for _, tc := range []struct {
		busy, own time.Duration
		secs      float64
		want      float64
	}{
		{30 * time.Second, 10 * time.Second, 20, 1},
		{10 * time.Second, 10 * time.Second, 20, 0},
		{9 * time.Second, 10 * time.Second, 20, 0},
		{5 * time.Second, 0, 0, 0},
	} {
		if got := otherLoad(tc.busy, tc.own, tc.secs); got != tc.want {
			t.Errorf("otherLoad(%v, %v, %v) = %v, want %v", tc.busy, tc.own, tc.secs, got, tc.want)
		}
	}
}
