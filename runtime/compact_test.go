package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// compactTurns summarises when asked to, subscribes to a feed and starts
// a long job on "start", and answers everything else.
var compactTurns = []scripted.Turn{
	{When: &scripted.When{UserContains: "Summarize the conversation above"}, Text: "SUMMARY-OF-EARLIER: the feed sent numbered items.", Repeat: true},
	{AfterUser: "start", Text: "watching, and the job runs", ToolCalls: []scripted.Call{call("watch", `{}`), call("slow_job", `{}`)}},
	{Text: "noted", Repeat: true},
}

// A thread that outgrows its window is compacted: every request stays
// within the window, the summary reaches the requests after it, a tool
// call still waiting keeps its place (and its result, when it comes, its
// call), the store keeps every message, and GET history lists the
// compactions.
func TestCompactionKeepsRequestsWithinTheWindow(t *testing.T) {
	jobs := newToolServer(t, "jobs", tool("slow_job"), tool("watch"))
	const window = 8000
	e := newEnv(t, envOptions{turns: compactTurns, servers: []string{jobs.URL()},
		tweak: func(c *Config) { c.Compaction = CompactionConfig{Window: window} }})
	th := e.newThread()
	e.post(th, "start")
	watch, job := jobs.next(), jobs.next()
	if watch.Operation != "watch" {
		watch, job = job, watch
	}
	if status, body := callback(t, watch.CallbackURL, rap.ToolResult{GroupID: th, ID: watch.ID, Text: "watching", Subscription: true}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	padding := strings.Repeat("x", 400)
	const notes = 120
	for i := range notes {
		ev := rap.SubscriptionEvent{GroupID: th, ToolCallID: watch.ID, EventID: fmt.Sprintf("e%d", i), Text: fmt.Sprintf("item %d %s", i, padding), Associative: true}
		if status, body := callback(t, watch.CallbackURL, ev); status != 200 {
			t.Fatalf("event %d: %d %s", i, status, body)
		}
		e.idle(th)
	}
	reply(t, job, "job done")
	e.waitHistory(th, "the job's result and its answer", func(h []store.Message) bool {
		return countResults(h, "job done") == 1 && h[len(h)-1].Role == store.RoleAssistant
	})
	e.idle(th)

	var summaries, answers int
	for _, req := range e.model.requests() {
		if req.System == compactInstructions {
			summaries++
			continue
		}
		answers++
		if n := estimateTokens(req); n > window {
			t.Errorf("a request of about %d tokens was sent; the window is %d", n, window)
		}
	}
	if summaries < 2 {
		t.Fatalf("%d summaries were asked for over %d notes; want the thread compacted more than once", summaries, notes)
	}
	last := e.model.requests()[len(e.model.requests())-1]
	var text strings.Builder
	var sawCall, sawResult bool
	for _, m := range last.Messages {
		text.WriteString(m.Text)
		// A result that came after later messages is shown where it
		// arrived, as a note (arrange.go).
		sawResult = sawResult || strings.Contains(m.Text, "job done")
		for _, c := range m.ToolCalls {
			sawCall = sawCall || c.Name == "slow_job"
		}
		for _, r := range m.ToolResults {
			sawResult = sawResult || strings.Contains(r.Text, "job done")
		}
	}
	if !strings.Contains(text.String(), "SUMMARY-OF-EARLIER") {
		t.Errorf("the last request does not carry the summary")
	}
	if !sawCall || !sawResult {
		t.Errorf("the last request lost the long-running call (call seen %v, result seen %v)", sawCall, sawResult)
	}
	h := e.history(th)
	for i := range notes {
		if countResults(h, fmt.Sprintf("item %d ", i)) != 1 {
			t.Errorf("the store lost event %d", i)
		}
	}
	comps, err := e.rt.Compactions(context.Background(), th)
	if err != nil || len(comps) != summaries {
		t.Errorf("GET history's compactions = %d, %v; want %d", len(comps), err, summaries)
	}
	t.Logf("%d answers, %d compactions, %d messages kept", answers, summaries, len(h))
}

// A thread is compacted on demand, and one with too little to summarise
// says so.
func TestCompactOnDemand(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{compactTurns[0], {Text: "ok", Repeat: true}}})
	th := e.newThread()
	ctx := context.Background()
	if _, err := e.rt.CompactThread(ctx, th); err == nil || !strings.Contains(err.Error(), "nothing to compact") {
		t.Fatalf("compacting an empty thread: %v; want it refused", err)
	}
	for i := range 6 {
		e.post(th, fmt.Sprintf("message %d", i))
		e.idle(th)
	}
	c, err := e.rt.CompactThread(ctx, th)
	if err != nil || c.Messages < 2 || !strings.Contains(c.Summary, "SUMMARY-OF-EARLIER") {
		t.Fatalf("CompactThread = %+v, %v", c, err)
	}
	e.post(th, "after")
	e.idle(th)
	reqs := e.model.requests()
	if got := reqs[len(reqs)-1]; !strings.Contains(fmt.Sprint(got.Messages), "SUMMARY-OF-EARLIER") {
		t.Fatalf("the request after an on-demand compaction lacks the summary: %v", got.Messages)
	}
}

// tooLongModel refuses, as providers do, a request of more than max
// messages (a summarising request aside).
type tooLongModel struct {
	model.Provider
	max int
}

func (m *tooLongModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if req.System != compactInstructions && len(req.Messages) > m.max {
		return nil, fmt.Errorf(`400 Bad Request {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens > 200000 maximum"}}`, 1000*len(req.Messages))
	}
	return m.Provider.Complete(ctx, req, s)
}

// When a provider refuses a prompt as too long although the estimate let
// it through, the thread is compacted and the request sent once more: the
// thread answers every message.
func TestPromptTooLongCompactsAndRetries(t *testing.T) {
	m := &tooLongModel{Provider: scripted.New([]scripted.Turn{compactTurns[0], {Text: "answered", Repeat: true}}), max: 10}
	e := newEnv(t, envOptions{model: m})
	th := e.newThread()
	for i := range 12 {
		e.post(th, fmt.Sprintf("message %d", i))
		e.idle(th)
	}
	h := e.history(th)
	if n := countAssistant(h, "answered"); n != 12 {
		t.Fatalf("%d of 12 messages were answered:\n%s", n, dump(h))
	}
	comps, err := e.rt.Compactions(context.Background(), th)
	if err != nil || len(comps) == 0 {
		t.Fatalf("compactions = %v, %v; want the thread compacted when the provider refused", comps, err)
	}
}

// The byte bound that spares most requests an estimate is never below the
// estimate, whatever the text.
func TestTokensAtMostBoundsTheEstimate(t *testing.T) {
	texts := []string{"", "plain English words", "a1b2c3d4e5f6a1b2c3", "aAaAaAaA", "日本語のテキスト", "Привет мир", "{\"k\": [1, 2, 3]}", strings.Repeat("9a", 500)}
	for _, text := range texts {
		req := model.Request{System: text, Messages: []model.Message{{Role: model.RoleUser, Text: text},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{Name: "x", Arguments: []byte(`{"q":"` + text + `"}`)}}},
			{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c", Text: text}}}}}
		if b, e := tokensAtMost(req), estimateTokens(req); b < e {
			t.Errorf("for %q the bound %d is below the estimate %d", text, b, e)
		}
	}
}

// A compaction on demand whose summary the model fails to write says so
// (api.ErrModelFailed: 502), and records nothing.
func TestCompactOnDemandModelFailure(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{
		{When: &scripted.When{UserContains: "Summarize the conversation above"}, Error: "overloaded", Repeat: true},
		{Text: "ok", Repeat: true},
	}})
	th := e.newThread()
	for i := range 8 {
		e.post(th, fmt.Sprintf("message %d", i))
		e.idle(th)
	}
	_, err := e.rt.CompactThread(context.Background(), th)
	if !errors.Is(err, api.ErrModelFailed) || !strings.Contains(err.Error(), "overloaded") {
		t.Fatalf("CompactThread with a failing model: %v; want ErrModelFailed with the model's reason", err)
	}
	if comps, _ := e.rt.Compactions(context.Background(), th); len(comps) != 0 {
		t.Fatalf("a failed compaction recorded %d compactions", len(comps))
	}
}
