package runtime

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/store"
)

// BenchmarkRequestByHistoryLength measures what one request carries over
// a thread of N messages (200-byte turns), without compaction and with
// the compaction gorap makes for a 200,000-token window: the estimated
// tokens of each request (request-tokens-full, request-tokens-compacted)
// and of one summarising request (summary-request-tokens: the input a
// compaction costs), and the time to arrange the compacted request.
// docs/benchmarks.md shows its figures, kept in
// internal/benchplot/compaction.csv.
func BenchmarkRequestByHistoryLength(b *testing.B) {
	const window = 200_000
	limit := int(window * DefaultCompactionShare)
	for _, n := range []int{10, 100, 1_000, 10_000, 100_000} {
		history := make([]store.Message, n)
		text := strings.Repeat("lorem ipsum ", 16)
		for i := range history {
			role := store.RoleUser
			if i%2 == 1 {
				role = store.RoleAssistant
			}
			history[i] = store.Message{ThreadID: "t", Seq: int64(i + 1), Role: role, Text: text}
		}
		request := func(view []store.Message) model.Request {
			msgs, _ := arrangeFrom(joined{head: view}, modelView{}, nil, nil)
			return model.Request{Messages: msgs}
		}
		full := estimateTokens(request(history))
		var comp *store.Compaction
		summaryTokens := 0
		if full > limit {
			cut := compactCut(history, DefaultCompactionKeepLast, limit/2)
			comp = &store.Compaction{ThreadID: "t", UpToSeq: history[cut-1].Seq, Messages: cut, Summary: strings.Repeat("summary ", 500)}
			// A thread is compacted when it first passes the limit, and
			// each time after that it summarises the previous summary and
			// what followed: each summarising request is about as large
			// as the one that first passed the limit.
			p := 1
			for estimateTokens(request(history[:p])) <= limit {
				p += max(p/8, 1)
			}
			first := compactCut(history[:p], DefaultCompactionKeepLast, limit/2)
			summaryTokens = estimateTokens(request(history[:first]))
		}
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			var compacted int
			for b.Loop() {
				compacted = estimateTokens(request(compactedView(history, comp)))
			}
			b.ReportMetric(float64(full), "request-tokens-full")
			b.ReportMetric(float64(compacted), "request-tokens-compacted")
			b.ReportMetric(float64(summaryTokens), "summary-request-tokens")
		})
	}
}
