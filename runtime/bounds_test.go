package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// longLines returns about size bytes of numbered lines.
func longLines(size int) string {
	var b strings.Builder
	for i := 1; b.Len() < size; i++ {
		fmt.Fprintf(&b, "line %d of a long tool result\n", i)
	}
	return b.String()
}

// sentResult returns the result of callID in req, failing the test when
// there is none.
func sentResult(t *testing.T, req model.Request, callID string) model.ToolResult {
	t.Helper()
	for _, m := range req.Messages {
		for _, r := range m.ToolResults {
			if r.CallID == callID {
				return r
			}
		}
	}
	t.Fatalf("request has no result of %s", callID)
	return model.ToolResult{}
}

const leftOutNote = "of this result left out: the whole result is kept in the thread's history"

// With a model that declares an 8,000-token window, a 2 MB tool result is
// sent to the model as its start and its end within a tenth of the window
// (the default share), with a note saying how much was left out; a result
// of exactly the share is sent whole and one a token over it is cut. The
// store and the client API's history keep every result whole.
func TestLargeResultIsBoundedForTheModelOnly(t *testing.T) {
	m := scripted.New([]scripted.Turn{
		{AfterUser: "go", ToolCalls: []scripted.Call{call("big", `{}`), call("exact", `{}`), call("over", `{}`)}},
		{When: &scripted.When{LastInput: "tool_result"}, Text: "read them", Repeat: true},
	})
	m.SetContextWindow(8000)
	ts := newToolServer(t, "tools", tool("big"), tool("exact"), tool("over"))
	e := newEnv(t, envOptions{model: m, servers: []string{ts.URL()}})
	if recs := e.logs.records("model context window"); len(recs) != 1 || recs[0]["context_window"] != 8000.0 || recs[0]["max_result_tokens"] != 800.0 {
		t.Errorf("start-up log of the window: %v", recs)
	}
	th := e.newThread()
	e.post(th, "go")

	big := longLines(2 << 20)
	exact := strings.Repeat("a", 4*800) // 800 tokens: the share of 8,000
	over := strings.Repeat("a", 4*800+1)
	texts := map[string]string{"big": big, "exact": exact, "over": over}
	ids := map[string]string{}
	for range 3 {
		inv := ts.next()
		ids[inv.Operation] = inv.ID
		reply(t, inv, texts[inv.Operation])
	}
	e.waitHistory(th, "the reply after the results", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "read them") })

	reqs := e.model.requests()
	last := reqs[len(reqs)-1]
	sent := sentResult(t, last, ids["big"])
	if n := model.EstimateTokens(sent.Text); n > 800 {
		t.Errorf("the 2 MB result was sent as %d tokens, over a tenth of the 8,000-token window", n)
	}
	if !strings.Contains(sent.Text, leftOutNote) || !strings.Contains(sent.Text, " bytes (about ") {
		t.Errorf("the cut result has no note: %.300q", sent.Text)
	}
	if !strings.HasPrefix(sent.Text, "line 1 of a long tool result\n") {
		t.Errorf("the cut result does not start as the result: %.100q", sent.Text)
	}
	lastLine := big[strings.LastIndex(strings.TrimSuffix(big, "\n"), "\n")+1:]
	if !strings.HasSuffix(sent.Text, lastLine) {
		t.Errorf("the cut result does not end as the result (%q): …%q", lastLine, sent.Text[len(sent.Text)-100:])
	}
	if got := sentResult(t, last, ids["exact"]).Text; got != exact {
		t.Errorf("a result of exactly the share was cut to %d bytes", len(got))
	}
	if got := sentResult(t, last, ids["over"]).Text; got == over || !strings.Contains(got, leftOutNote) {
		t.Errorf("a result one token over the share was sent whole")
	}

	// The store keeps every result whole…
	stored := map[string]string{}
	for _, r := range results(e.history(th)) {
		stored[r.CallID] = r.Text
	}
	for name, text := range texts {
		if stored[ids[name]] != text {
			t.Errorf("the store holds %d bytes of the %s result, want all %d", len(stored[ids[name]]), name, len(text))
		}
	}
	// …and so does the client API's history.
	status, body := do(t, "GET", e.srv.URL+"/v1/threads/"+th+"/messages", "")
	var page struct{ Messages []api.Message }
	if err := json.Unmarshal([]byte(body), &page); err != nil || status != http.StatusOK {
		t.Fatalf("GET messages: %d %v", status, err)
	}
	found := false
	for _, msg := range page.Messages {
		for _, r := range msg.ToolResults {
			if r.CallID == ids["big"] {
				found = r.Text == big
			}
		}
	}
	if !found {
		t.Errorf("GET /v1/threads/{id}/messages does not return the whole 2 MB result")
	}
}

// Without a window from its configuration or its model, the runtime
// says at start that the window is unknown, that results are bounded as
// for 128,000 tokens, and how to set it; a configured window wins over
// the one the model declares.
func TestContextWindowUnknownOrConfigured(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	if !strings.Contains(e.logs.String(), "context window is unknown") || !strings.Contains(e.logs.String(), "128,000 tokens") ||
		!strings.Contains(e.logs.String(), "--context-window TOKENS") {
		t.Errorf("no start-up line saying the window is unknown and how to set it:\n%s", e.logs)
	}
	if n, per := e.rt.ContextWindow(); n != model.DefaultContextWindow || per != 12_800 {
		t.Errorf("window %d, %d per result; want the default %d, a tenth of it per result", n, per, model.DefaultContextWindow)
	}

	m := scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}})
	m.SetContextWindow(8000)
	c := newEnv(t, envOptions{model: m, tweak: func(c *Config) { c.ContextWindow = 50_000; c.MaxResultShare = 0.5 }})
	if n, per := c.rt.ContextWindow(); n != 50_000 || per != 25_000 {
		t.Errorf("configured window: %d, %d per result; want 50,000 and 25,000", n, per)
	}
	if strings.Contains(c.logs.String(), "context window is unknown") {
		t.Errorf("a configured window was logged as unknown")
	}

	for _, bad := range []func(*Config){
		func(c *Config) { c.ContextWindow = -1 },
		func(c *Config) { c.MaxResultShare = -0.1 },
		func(c *Config) { c.MaxResultShare = 1.5 },
	} {
		cfg := Config{Store: e.st, Model: m, Secret: make([]byte, 16), PublicURL: "http://x"}
		bad(&cfg)
		if _, err := New(&cfg); err == nil || !strings.Contains(err.Error(), "ContextWindow") && !strings.Contains(err.Error(), "MaxResultShare") {
			t.Errorf("%+v: err = %v, want one naming the setting", cfg, err)
		}
	}
}

// failOnce fails the completion that follows a tool result, once, so that
// the runtime runs the same completion again.
type failOnce struct {
	model.Provider
	failed atomic.Bool
}

func (f *failOnce) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if n := len(req.Messages); n > 0 && len(req.Messages[n-1].ToolResults) > 0 && f.failed.CompareAndSwap(false, true) {
		return nil, errors.New("overloaded")
	}
	return f.Provider.Complete(ctx, req, s)
}

// The same history gives the same request, byte for byte: a completion
// retried over it sends what the failed one sent, cut result included,
// and a later completion sends those messages again unchanged, so the
// provider's prompt cache keeps serving them.
func TestBoundedRequestsAreStable(t *testing.T) {
	m := scripted.New([]scripted.Turn{
		{AfterUser: "go", ToolCalls: []scripted.Call{call("big", `{}`)}},
		{When: &scripted.When{LastInput: "tool_result"}, Text: "read it"},
		{AfterUser: "more", Text: "still here"},
	})
	m.SetContextWindow(8000)
	ts := newToolServer(t, "tools", tool("big"))
	e := newEnv(t, envOptions{model: &failOnce{Provider: m}, servers: []string{ts.URL()}, tweak: func(c *Config) {
		c.ModelRetry = ModelRetryPolicy{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}
	}})
	th := e.newThread()
	e.post(th, "go")
	reply(t, ts.next(), longLines(1<<20))
	e.waitHistory(th, "the reply to the result", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "read it") })
	e.post(th, "more")
	e.waitHistory(th, "the reply to more", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "still here") })

	reqs := e.model.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4 (call, failed, retried, more)", len(reqs))
	}
	failed, retried := mustJSON(t, reqs[1].Messages), mustJSON(t, reqs[2].Messages)
	if failed != retried {
		t.Errorf("the retried completion sent other messages than the failed one:\n%s\n%s", failed, retried)
	}
	if !strings.Contains(retried, "left out") {
		t.Errorf("the 1 MB result was not cut")
	}
	if got, want := mustJSON(t, reqs[3].Messages[:len(reqs[2].Messages)]), retried; got != want {
		t.Errorf("a later request changed the earlier messages:\n%s\n%s", got, want)
	}
}

// shot is the base64 data of image i of round r, told apart on the wire.
func shot(r, i int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "png-%d-%d", r, i))
}

// A request carries the newest 20 images of the conversation at most,
// counted from its end: each older one is sent as a note saying it was
// left out. This holds on the wire through the Anthropic provider and its
// cache of encoded messages, as images arrive and push older ones out;
// a later request that adds no image repeats the previous one's prefix,
// which the API then serves from its prompt cache.
func TestOnlyTheNewestImagesAreSent(t *testing.T) {
	const rounds, perRound = 4, 8
	srv := wiretest.NewAnthropic(func(req wiretest.Request) wiretest.Reply {
		n := 0
		for _, m := range req.Messages {
			n += len(m.ToolCalls)
		}
		if n >= rounds {
			return wiretest.Reply{Text: "done"}
		}
		return wiretest.Reply{ToolCalls: []model.ToolCall{{Name: "shots", Arguments: json.RawMessage(`{}`)}}}
	})
	defer srv.Close()
	ts := newToolServer(t, "tools", tool("shots"))
	e := newEnv(t, envOptions{model: anthropicAt(t, srv, "k"), servers: []string{ts.URL()}})
	th := e.newThread()
	e.post(th, "go")
	for r := range rounds {
		inv := ts.next()
		var content []rap.ContentItem
		for i := range perRound {
			content = append(content, rap.ContentItem{Type: "image", Data: shot(r, i), MediaType: "image/png"})
		}
		status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, Content: content})
		if status != http.StatusOK {
			t.Fatalf("callback: %d %s", status, body)
		}
	}
	e.idle(th)
	e.post(th, "and now?")
	e.idle(th)

	reqs := srv.Requests()
	if len(reqs) != rounds+2 {
		t.Fatalf("%d requests, want %d", len(reqs), rounds+2)
	}
	for i, req := range reqs {
		body := string(req.Body)
		have := min(i, rounds) * perRound
		images := strings.Count(body, `"type":"image"`)
		notes := strings.Count(body, "images are sent at most per request")
		if images != min(have, DefaultMaxImagesPerRequest) || notes != have-images {
			t.Errorf("request %d of a conversation with %d images: %d sent and %d notes, want %d and %d",
				i, have, images, notes, min(have, DefaultMaxImagesPerRequest), have-min(have, DefaultMaxImagesPerRequest))
		}
	}
	// The newest 20 of 32: rounds 2 and 3, and the last 4 of round 1.
	final := string(reqs[len(reqs)-1].Body)
	var sent []bool
	for r := range rounds {
		for i := range perRound {
			sent = append(sent, strings.Contains(final, shot(r, i)))
		}
	}
	var want []bool
	for k := range rounds * perRound {
		want = append(want, k >= rounds*perRound-DefaultMaxImagesPerRequest)
	}
	if !reflect.DeepEqual(sent, want) {
		t.Errorf("images sent, oldest first: %v\nwant %v", sent, want)
	}
	last, prev := reqs[len(reqs)-1], reqs[len(reqs)-2]
	if bp := prev.Breakpoints; len(bp) == 0 || last.CacheReadBytes < bp[len(bp)-1].PrefixBytes {
		t.Errorf("the request after \"and now?\" read %d bytes from the prompt cache; want the previous request's prefix", last.CacheReadBytes)
	}
}

// A subscription event reaches the model through the same path as a
// result (an injected call and its result), so a large event is cut the
// same way, and a late result's note too.
func TestEventsAndLateResultsAreBounded(t *testing.T) {
	big := longLines(200_000)
	h := injectedPair("ev1", "watch", "c0", nil, big, "")
	h = append([]store.Message{user("watch")}, h...)
	h = append(h, asst("", "c1"), user("meanwhile"), res("c1", big))
	out := arrangeHistoryWith(joined{h, nil}, modelView{maxResultTokens: 500}, nil)
	var event, late string
	for _, m := range out {
		for _, r := range m.ToolResults {
			if r.CallID == "ev1" {
				event = r.Text
			}
		}
		if strings.Contains(m.Text, "Result of the earlier call c1") {
			late = m.Text
		}
	}
	for name, text := range map[string]string{"event": event, "late result": late} {
		if !strings.Contains(text, leftOutNote) || model.EstimateTokens(text) > 500+100 {
			t.Errorf("%s: %d tokens, note %v", name, model.EstimateTokens(text), strings.Contains(text, leftOutNote))
		}
	}
}
