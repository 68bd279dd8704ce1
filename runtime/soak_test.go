package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// The soak test of RAP SU-6: 1,000 subscription events from several SDK
// tool servers to 50 threads are each handled exactly once — threaded ones
// in a child thread of their own that reports back, associative ones inline
// — and no parent history holds the raw text of a threaded event.
func TestSoakSubscriptionEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test; run without -short")
	}
	servers, threads, perThread := 4, 50, 20 // 1,000 events in all
	if raceEnabled {
		threads, perThread = 20, 8 // the race detector slows everything tenfold
	}
	var srcs []*eventSource
	var urls []string
	for i := range servers {
		s := newEventSource(t, fmt.Sprintf("src%d", i))
		srcs = append(srcs, s)
		urls = append(urls, s.url)
	}
	e := newEnv(t, envOptions{servers: urls, model: &fnModel{fn: eventAgent(func(user string) (string, any) {
		var srv, topic string
		fmt.Sscanf(user, "subscribe %s %s", &srv, &topic)
		return "watch_" + srv, map[string]string{"topic": topic}
	})}})
	start := time.Now()
	roots := make([]string, threads)
	for i := range roots {
		roots[i] = e.newThread()
		e.post(roots[i], fmt.Sprintf("subscribe src%d topic%d", i%servers, i))
	}
	for _, r := range roots {
		r := r
		poll(t, "the subscriptions", func() bool {
			var n int
			e.st.View(context.Background(), func(tx store.Tx) error {
				n, _ = countActiveSubscriptions(tx, r)
				return nil
			})
			return n == 1
		})
	}
	threaded := map[string]map[string]bool{} // root -> raw texts
	inline := map[string]map[string]bool{}
	for i, r := range roots {
		threaded[r], inline[r] = map[string]bool{}, map[string]bool{}
		topic := fmt.Sprintf("topic%d", i)
		for k := range perThread {
			assoc := k%4 == 3
			text := fmt.Sprintf(`{"thread":%d,"n":%d,"raw":"RAW-%d-%d"}`, i, k, i, k)
			if assoc {
				inline[r][text] = true
			} else {
				threaded[r][text] = true
			}
			srcs[i%servers].push(topic, sourceEvent{text: text, associative: assoc})
		}
	}
	wantReports := perThread - perThread/4
	deadline := time.Now().Add(50 * time.Second)
	for _, r := range roots {
		for {
			h := e.history(r)
			_, res := injected(h)
			if len(res) >= perThread {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %s: %d of %d events handled after %v", r, len(res), perThread, time.Since(start))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, r := range roots {
		e.idle(r)
	}
	for _, r := range roots {
		h := e.history(r)
		_, res := injected(h)
		reports := 0
		seenInline := map[string]int{}
		for _, x := range res {
			switch {
			case strings.Contains(x.Text, "handled one event"):
				reports++
			default:
				seenInline[x.Text]++
			}
		}
		if reports != wantReports || len(seenInline) != len(inline[r]) {
			t.Fatalf("thread %s: %d reports and %d inline events, want %d and %d", r, reports, len(seenInline), wantReports, len(inline[r]))
		}
		for text, n := range seenInline {
			if !inline[r][text] || n != 1 {
				t.Fatalf("thread %s: inline event %s seen %d times", r, text, n)
			}
		}
		d := dump(h)
		for text := range threaded[r] {
			raw := text[strings.Index(text, "RAW-"):]
			raw = raw[:strings.Index(raw, `"`)]
			if strings.Contains(d, raw+`\"`) {
				t.Fatalf("thread %s: the parent history holds the raw threaded event %s", r, raw)
			}
		}
		kids := e.children(r)
		if len(kids) != wantReports {
			t.Fatalf("thread %s: %d child threads, want one per threaded event (%d)", r, len(kids), wantReports)
		}
		got := map[string]bool{}
		for _, k := range kids {
			if k.Status != store.ThreadClosed {
				t.Fatalf("child %s is not closed", k.ID)
			}
			_, kres := injected(e.history(k.ID))
			own := kres[len(kres)-1].Text
			if got[own] || !threaded[r][own] {
				t.Fatalf("child %s handled %s, a duplicate or foreign event", k.ID, own)
			}
			got[own] = true
		}
	}
	t.Logf("%d events to %d threads from %d tool servers handled in %v", threads*perThread, threads, servers, time.Since(start))
}

// BenchmarkThreadedEvent measures a subscription event's whole path: the
// callback, a child thread seeded with the parent's history, its
// completion (a function model, no LLM), its close_thread with a report,
// and the parent's slice for the report. events/s is the throughput of one
// parent thread.
func BenchmarkThreadedEvent(b *testing.B) {
	ts := newToolServer(b, "feed", tool("watch"))
	e := newEnv(b, envOptions{servers: []string{ts.URL()}, model: &fnModel{fn: eventAgent(func(string) (string, any) {
		return "watch", map[string]any{}
	})}})
	th := e.newThread()
	e.post(th, "subscribe")
	inv := ts.next()
	reply0, _ := callback(b, inv.CallbackURL, map[string]any{"type": "tool_result", "group_id": th, "id": inv.ID, "text": "subscribed", "subscription": true})
	if reply0 != 200 {
		b.Fatal(reply0)
	}
	e.idle(th)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if status, body := callback(b, inv.CallbackURL, map[string]any{"type": "subscription_event", "group_id": th, "tool_call_id": inv.ID,
			"text": fmt.Sprintf(`{"n":%d}`, i)}); status != 200 {
			b.Fatalf("%d %s", status, body)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, res := injected(e.history(th))
		if len(res) >= b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d events reported", len(res), b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// The flow of `rap demo`, played by the scripted model against an SDK
// subscription server: each event wakes the agent in a child thread that
// reports back and closes, a sleep wakes the thread, and a
// cancel_subscription stops the events (RAP SU-6, BT-1, BT-4, SU-7).
func TestScriptedDemoFlow(t *testing.T) {
	src := newEventSource(t, "feed")
	e := newEnv(t, envOptions{servers: []string{src.url}, turns: []scripted.Turn{
		{AfterUser: "watch", ToolCalls: []scripted.Call{call("watch_feed", `{"topic": "news"}`)}},
		{When: &scripted.When{LastResultContains: "Subscribed", LastInput: "tool_result"}, Text: "Watching.",
			ToolCalls: []scripted.Call{call(BuiltinSleepUntilEventOrUser, `{}`)}},
		{When: &scripted.When{UserContains: "was started to handle", LastInput: "user"}, Repeat: true,
			ToolCalls: []scripted.Call{call(BuiltinCloseThread, `{"thread_id": "{{thread_id}}", "report_to_parent": "an event was handled"}`)}},
		{When: &scripted.When{LastResultContains: "an event was handled", LastInput: "tool_result"}, Text: "A child handled an event.", Repeat: true},
		{AfterUser: "nap", ToolCalls: []scripted.Call{call(BuiltinSleep, `{"seconds": 1}`)}},
		{When: &scripted.When{LastResultContains: "Woke up", LastInput: "tool_result"}, Text: "Rested."},
		{AfterUser: "stop", ToolCalls: []scripted.Call{call(BuiltinCancelSubscription, `{"tool_call_id": "{{call_id:watch_feed}}"}`)}},
		{When: &scripted.When{LastResultContains: "is cancelled", LastInput: "tool_result"}, Text: "Stopped watching."},
		{Text: "ok", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "watch the news")
	e.waitHistory(th, "watching", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "Watching.") })
	src.push("news", sourceEvent{text: "RAW-A"}, sourceEvent{text: "RAW-B"})
	// Both reports reach the parent; when they arrive together they are one
	// batch (one slice, one answer), so count the reports, not the answers.
	e.waitHistory(th, "two reports", func(h []store.Message) bool {
		_, res := injected(h)
		reports := 0
		for _, r := range res {
			if strings.Contains(r.Text, "an event was handled") {
				reports++
			}
		}
		return reports == 2 && hasText(h, store.RoleAssistant, "A child handled an event.")
	})
	e.idle(th)
	e.post(th, "nap a second")
	e.waitHistory(th, "the wake-up", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "Rested.") })
	e.idle(th)
	e.post(th, "stop watching")
	h := e.waitHistory(th, "the cancellation", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "Stopped watching.") })
	select {
	case req := <-src.cancel:
		if req.ThreadID != th {
			t.Fatalf("cancel_tool_call for thread %s", req.ThreadID)
		}
	case <-time.After(waitFor):
		t.Fatal("the tool server got no /cancel_tool_call")
	}
	if strings.Contains(dump(h), "RAW-") {
		t.Fatalf("raw event text in the parent:\n%s", dump(h))
	}
	for _, k := range e.children(th) {
		if k.Status != store.ThreadClosed {
			t.Fatalf("child %s is still open", k.ID)
		}
	}
	if n := len(e.children(th)); n != 2 {
		t.Fatalf("%d children, want 2", n)
	}
}
