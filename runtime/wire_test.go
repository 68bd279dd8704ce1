package runtime

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gorap/gorap/model"
)

// The messages a request declares settled
// (model.Request.Settled, from arranged.settled) read the same in every
// later request of the thread, whatever arrives and however placeholders
// change, so a provider may send their cached encoding.
func TestSettledMessagesNeverChange(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 11))
		h := randomHistory(rng, 5+rng.IntN(60))
		// Some results are cut to their note (bounds.go).
		view := modelView{images: rng.IntN(2) == 0, maxResultTokens: []int{0, 2}[rng.IntN(2)]}
		var prev *arranged
		var frozen []model.Message // deep copies of the settled messages so far
		for k := 0; k <= len(h); k += 1 + rng.IntN(4) {
			more := h[k:min(len(h), k+rng.IntN(3))]
			auth := map[string]bool{}
			for i := range 40 {
				if rng.IntN(3) == 0 {
					auth[fmt.Sprintf("c%d", i)] = true
				}
			}
			got, next := arrangeFrom(joined{h[:k:k], more}, view, placeholderFor(auth, nil), prev)
			n := next.settled()
			if n < len(frozen) {
				t.Fatalf("seed %d: the settled prefix shrank from %d to %d messages", seed, len(frozen), n)
			}
			if n > len(got) {
				t.Fatalf("seed %d: %d messages settled of %d", seed, n, len(got))
			}
			for i, m := range frozen {
				if !reflect.DeepEqual(got[i], m) {
					t.Fatalf("seed %d, %d saved messages: settled message %d changed\nwas %+v\nnow %+v", seed, k, i, m, got[i])
				}
			}
			for i := len(frozen); i < n; i++ {
				frozen = append(frozen, deepCopy(got[i]))
			}
			prev = next
		}
	}
}

func deepCopy(m model.Message) model.Message {
	m.ToolCalls = append([]model.ToolCall(nil), m.ToolCalls...)
	m.ToolResults = append([]model.ToolResult(nil), m.ToolResults...)
	for i := range m.ToolResults {
		m.ToolResults[i].Content = append([]model.ContentPart(nil), m.ToolResults[i].Content...)
	}
	return m
}
