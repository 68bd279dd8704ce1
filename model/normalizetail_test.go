package model_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

// NormalizeTail from any stable turn k gives turns[k:], the stable count
// and the starts that NormalizeStarts gives for the whole conversation, or
// declines; over random conversations, awkward ones included (redelivered
// and late results, merged roles), as they grow one message at a time.
func TestNormalizeTailMatchesWhole(t *testing.T) {
	tails, declined := 0, 0
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		msgs := wiretest.RandomConversation(r)
		if seed%3 == 1 {
			msgs = wiretest.Awkward(msgs)
		}
		settled := 0
		for n := 1; n <= len(msgs); n++ {
			settled = max(settled, n-r.IntN(4))
			turns, stable, starts, err := model.NormalizeStarts(msgs[:n], settled)
			if err != nil {
				continue
			}
			if len(starts) != len(turns) {
				t.Fatalf("seed %d, %d messages: %d starts for %d turns", seed, n, len(starts), len(turns))
			}
			for k := 1; k < stable; k++ {
				tail, tstable, tstarts, ok, err := model.NormalizeTail(msgs[:n], settled, k, starts[k-1], starts[k])
				if err != nil {
					t.Fatalf("seed %d, %d messages, k %d: %v", seed, n, k, err)
				}
				if !ok {
					declined++
					continue
				}
				tails++
				if tstable != stable || !reflect.DeepEqual(tail, turns[k:]) || !reflect.DeepEqual(tstarts, starts[k:]) {
					t.Fatalf("seed %d, %d messages (settled %d), k %d: tail differs\ntail:  stable %d starts %v %+v\nwhole: stable %d starts %v %+v",
						seed, n, settled, k, tstable, tstarts, tail, stable, starts[k:], turns[k:])
				}
			}
		}
	}
	if tails < 1000 || declined == 0 {
		t.Errorf("%d tails matched, %d declined: the test does not exercise both", tails, declined)
	}
	t.Logf("%d tails matched, %d declined", tails, declined)
}
