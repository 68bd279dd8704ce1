package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// numberedSummaries answers each summarising request with a summary of
// its own number, so that a test can tell which one a request carries.
type numberedSummaries struct {
	model.Provider
	n atomic.Int64
}

func (m *numberedSummaries) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if req.System == compactInstructions {
		return &model.Response{Text: fmt.Sprintf("SUMMARY #%d of the feed so far.", m.n.Add(1)), StopReason: "end_turn"}, nil
	}
	return m.Provider.Complete(ctx, req, s)
}

// The soak of compaction: one thread on an 8,000-token window gets
// GORAP_SOAK_EVENTS associative subscription events (default 5,000) and
// one tool result of a random size up to 2 MB every tenth event (500),
// with a call pending throughout. Every request stays within the window,
// the thread answers every input, the pending call keeps its place, each
// compaction's summary reaches the next request, and the store keeps
// every event and result. It runs only with GORAP_SOAK=1 (minutes, and
// about half a gigabyte written); it reports the compactions and the
// largest request.
func TestSoakCompaction(t *testing.T) {
	if os.Getenv("GORAP_SOAK") == "" {
		t.Skip("set GORAP_SOAK=1 to run the compaction soak")
	}
	events := 5000
	if v, err := strconv.Atoi(os.Getenv("GORAP_SOAK_EVENTS")); err == nil && v > 0 {
		events = v
	}
	const window = 8000
	jobs := newToolServer(t, "jobs", tool("slow_job"), tool("watch"), tool("fetch"))
	rng := rand.New(rand.NewPCG(7, 11))
	var sizesMu sync.Mutex
	var sizes []int
	turns := []scripted.Turn{
		{AfterUser: "start", Text: "watching", ToolCalls: []scripted.Call{call("watch", `{}`), call("slow_job", `{}`)}},
		{When: &scripted.When{LastResultContains: "please fetch"}, Text: "fetching", ToolCalls: []scripted.Call{call("fetch", `{}`)}, Repeat: true},
		{Text: "noted", Repeat: true},
	}
	m := &numberedSummaries{Provider: scripted.New(turns)}
	e := newEnv(t, envOptions{model: m, servers: []string{jobs.URL()},
		tweak: func(c *Config) { c.Compaction = CompactionConfig{Window: window}; c.ContextWindow = window }})
	th := e.newThread()
	e.post(th, "start")
	watch, job := jobs.next(), jobs.next()
	if watch.Operation != "watch" {
		watch, job = job, watch
	}
	if status, body := callback(t, watch.CallbackURL, rap.ToolResult{GroupID: th, ID: watch.ID, Text: "watching", Subscription: true}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	e.idle(th)
	results := 0
	for i := range events {
		text := fmt.Sprintf("item %d", i)
		if i%10 == 9 {
			text += " please fetch"
		}
		ev := rap.SubscriptionEvent{GroupID: th, ToolCallID: watch.ID, EventID: fmt.Sprintf("e%d", i), Text: text, Associative: true}
		if status, body := callback(t, watch.CallbackURL, ev); status != 200 {
			t.Fatalf("event %d: %d %s", i, status, body)
		}
		if i%10 == 9 {
			inv := jobs.next()
			n := rng.IntN(2 << 20)
			sizesMu.Lock()
			sizes = append(sizes, n)
			sizesMu.Unlock()
			reply(t, inv, fmt.Sprintf("DATA %d ", results)+strings.Repeat("d", n))
			results++
		}
		e.idle(th)
	}
	reply(t, job, "job done")
	e.waitHistory(th, "the job's answer", func(h []store.Message) bool {
		return countResults(h, "job done") == 1 && h[len(h)-1].Role == store.RoleAssistant
	})

	reqs := e.model.requests()
	largest, answers, seenSummary := 0, 0, 0
	for _, req := range reqs {
		if req.System == compactInstructions {
			continue
		}
		answers++
		n := estimateTokens(req)
		largest = max(largest, n)
		if n > window {
			t.Errorf("a request of about %d tokens was sent; the window is %d", n, window)
		}
		text := fmt.Sprint(req.Messages)
		for k := seenSummary + 1; k <= int(m.n.Load()); k++ {
			if strings.Contains(text, fmt.Sprintf("SUMMARY #%d ", k)) {
				seenSummary = k
			}
		}
	}
	compactions := int(m.n.Load())
	if seenSummary != compactions {
		t.Errorf("the requests carried summaries up to #%d of %d", seenSummary, compactions)
	}
	h := e.history(th)
	for i := range events {
		if countResults(h, fmt.Sprintf("item %d", i)) < 1 {
			t.Errorf("the store lost event %d", i)
			break
		}
	}
	for i := range results {
		if countResults(h, fmt.Sprintf("DATA %d ", i)) != 1 {
			t.Errorf("the store has result %d %d times; want once", i, countResults(h, fmt.Sprintf("DATA %d ", i)))
			break
		}
	}
	if answers < events+results {
		t.Errorf("%d completions for %d events and %d results; want an answer to each", answers, events, results)
	}
	t.Logf("%d events, %d results (largest %d bytes), %d completions, %d compactions, largest request about %d tokens (window %d)",
		events, results, slicesMax(sizes), answers, compactions, largest, window)
}

func slicesMax(s []int) int {
	m := 0
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
