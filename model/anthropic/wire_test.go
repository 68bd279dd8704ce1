package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

var wireTools = []model.ToolSpec{
	{Name: "get_weather", Description: "Weather <today> & \"tomorrow\".", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
	{Name: "tool", InputSchema: json.RawMessage(`{"type":"object"}`)},
}

// Over random histories that grow one message at a time,
// with the settled prefix growing behind them, the bytes the provider
// sends with its wire cache equal those the SDK sends for the request
// built from scratch (sdk.MessageNewParams), breakpoints included.
func TestWireCacheSendsFromScratchBytes(t *testing.T) {
	srv := wiretest.NewAnthropic(func(wiretest.Request) wiretest.Reply { return wiretest.Reply{Text: "ok"} })
	defer srv.Close()
	ctx := context.Background()
	cached := 0
	for seed := uint64(0); seed < 30; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		msgs := wiretest.RandomConversation(r)
		if seed%4 == 1 {
			msgs = wiretest.Awkward(msgs)
		}
		images := seed%5 != 4
		p, err := New(&Options{APIKey: "k", BaseURL: srv.URL, SupportsImages: &images})
		if err != nil {
			t.Fatal(err)
		}
		w := &model.WireCache{}
		if seed%7 == 6 {
			w.Limit = 600 // the bound is reached part way
		}
		system := ""
		if seed%3 != 0 {
			system = "Be brief."
		}
		if seed%4 == 1 {
			system += " <Use> & \"escape\"."
		}
		tools := wireTools[:seed%3]
		settled := 0
		for n := 1; n <= len(msgs); n++ {
			settled = max(settled, n-r.IntN(4))
			req := model.Request{System: system, Tools: tools, Messages: msgs[:n], Settled: settled, SettledSeq: int64(settled), Wire: w}
			before := len(srv.Requests())
			_, cerr := p.Complete(ctx, req, nil)
			params, perr := p.params(req)
			if perr != nil {
				if cerr == nil || len(srv.Requests()) != before {
					t.Fatalf("seed %d, %d messages: from scratch fails (%v) but the cached path sent a request", seed, n, perr)
				}
				continue
			}
			st := p.messages.NewStreaming(ctx, params)
			for st.Next() {
			}
			st.Close()
			reqs := srv.Requests()
			if len(reqs) != before+2 {
				t.Fatalf("seed %d, %d messages: %d requests sent, want 2 (cached path: %v)", seed, n, len(reqs)-before, cerr)
			}
			if got, want := reqs[before].Body, reqs[before+1].Body; !bytes.Equal(got, want) {
				t.Fatalf("seed %d, %d messages (settled %d): bytes differ\ncached:       %s\nfrom scratch: %s", seed, n, settled, got, want)
			}
		}
		if w.Size() > 0 {
			cached++
		}
	}
	if cached < 10 {
		t.Errorf("only %d of 30 conversations used the wire cache: the test does not exercise it", cached)
	}
}

// A cache filled under another provider configuration, or for a longer
// settled prefix than the request's, is not read.
func TestWireCacheKeyAndShrink(t *testing.T) {
	p, _ := New(&Options{APIKey: "k", BaseURL: "http://127.0.0.1:1", Model: "a"})
	q, _ := New(&Options{APIKey: "k", BaseURL: "http://127.0.0.1:1", Model: "b"})
	msgs := wiretest.Conversation([]byte{0, 2, 3, 2, 3, 2, 3, 2, 3, 0})
	w := &model.WireCache{}
	req := model.Request{Messages: msgs, Settled: len(msgs) - 1, SettledSeq: 9, Wire: w}
	if _, err := p.body(req); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *Provider
		req  model.Request
	}{
		{"another model", q, req},
		{"shorter settled prefix", p, model.Request{Messages: msgs[:4], Settled: 3, SettledSeq: 3, Wire: w}},
	} {
		got, err := c.p.body(c.req)
		if err != nil {
			t.Fatal(err)
		}
		c.req.Wire = nil
		params, _ := c.p.params(c.req)
		want, _ := json.Marshal(params)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, got, want)
		}
	}
	_ = sdk.MessageNewParams{}
}

// BenchmarkBodyNewThread encodes the first request of a new thread each
// time: the system prompt differs (it names the thread), the tools do not,
// and there is no wire cache yet.
func BenchmarkBodyNewThread(b *testing.B) {
	p, err := New(&Options{APIKey: "k", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	tools := make([]model.ToolSpec, 0, 10)
	for i := range 5 {
		tools = append(tools, wireTools...)
		tools[len(tools)-1].Name = fmt.Sprintf("tool_%d", i)
		tools[len(tools)-2].Name = fmt.Sprintf("weather_%d", i)
	}
	req := model.Request{Tools: tools, Messages: []model.Message{{Role: model.RoleUser, Text: "loop"}}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		req.System = fmt.Sprintf("You are thread %d.", n)
		if _, err := p.body(req); err != nil {
			b.Fatal(err)
		}
	}
}

// isJSONObject must agree with decoding into a map (what it replaced)
// on every input, including the ones that a scan of the first byte alone
// would get wrong.
func TestIsJSONObjectAgreesWithDecoding(t *testing.T) {
	for _, in := range []string{
		`{}`, ` {"a":1} `, "\n\t{\"a\":[1,2]}", `{"a":1`, `{"a":1}x`, `[]`, `null`, `""`, ``, `  `,
		`{"a":}`, `{} {}`, `1`, `{"a":"\u00e9"}`, `{"a":{"b":null}}`,
	} {
		var m map[string]json.RawMessage
		want := json.Unmarshal([]byte(in), &m) == nil && m != nil
		if got := isJSONObject(json.RawMessage(in)); got != want {
			t.Errorf("isJSONObject(%q) = %v, decoding says %v", in, got, want)
		}
	}
}
