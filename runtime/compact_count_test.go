package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
)

// countingModel is a scripted model whose provider counts tokens
// (model.TokenCounter) with a fixed answer, and notes the summaries it is
// asked for.
type countingModel struct {
	model.Provider
	count     int
	counted   atomic.Int32
	summaries atomic.Int32
}

func (m *countingModel) CountTokens(ctx context.Context, req model.Request) (int, error) {
	m.counted.Add(1)
	return m.count, nil
}

func (m *countingModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; strings.Contains(last.Text, "Summarize the conversation above") {
		m.summaries.Add(1)
	}
	return m.Provider.Complete(ctx, req, s)
}

// Near the window, a provider that counts tokens decides: the estimate
// alone asks for no count while it is under the point of compaction;
// past it, the thread compacts only when the provider's count is past it
// too.
func TestProviderCountDecidesCompaction(t *testing.T) {
	for _, tc := range []struct {
		name    string
		count   int
		compact bool
	}{{"the count is under", 1000, false}, {"the count is over", 100000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := &countingModel{Provider: scripted.New(compactTurns), count: tc.count}
			e := newEnv(t, envOptions{tweak: func(c *Config) {
				c.Model = m
				c.Compaction = CompactionConfig{Window: 8000}
			}})
			th := e.newThread()
			e.post(th, "hello")
			e.idle(th)
			if n := m.counted.Load(); n != 0 {
				t.Fatalf("the provider was asked to count %d times for a short request", n)
			}
			for i := range 30 {
				e.post(th, fmt.Sprintf("note %d %s", i, strings.Repeat("word ", 200)))
				e.idle(th)
			}
			if m.counted.Load() == 0 {
				t.Fatal("the provider was never asked to count, though the estimate passed the point of compaction")
			}
			if got := m.summaries.Load() > 0; got != tc.compact {
				t.Fatalf("compacted: %v, want %v (provider count %d)", got, tc.compact, tc.count)
			}
		})
	}
}
