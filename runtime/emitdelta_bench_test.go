package runtime

import (
	"log/slog"
	"testing"
)

// BenchmarkEmitDelta: the cost of publishing one text_delta to a thread
// with one client that keeps up.
func BenchmarkEmitDelta(b *testing.B) {
	r := &Runtime{hub: newHub(StreamLimits{}), log: slog.New(slog.DiscardHandler)}
	r.coord = newLocalCoord(r)
	events, cancel := r.Subscribe("t")
	defer cancel()
	go func() {
		for range events {
		}
	}()
	d := deltaStream{r: r, threadID: "t"}
	b.ReportAllocs()
	for b.Loop() {
		d.TextDelta("hello, world ")
	}
	b.StopTimer()
	if r.hub.dropped > 0 {
		b.Fatalf("the subscriber was dropped")
	}
}
