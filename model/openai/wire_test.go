package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	sdk "github.com/openai/openai-go/v3"

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
// built from scratch (sdk.ChatCompletionNewParams).
func TestWireCacheSendsFromScratchBytes(t *testing.T) {
	srv := wiretest.NewOpenAI(func(wiretest.Request) wiretest.Reply { return wiretest.Reply{Text: "ok"} })
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
		p, err := New(&Options{APIKey: "k", BaseURL: srv.URL + "/v1", SupportsImages: &images})
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
			st := p.client.Chat.Completions.NewStreaming(ctx, params)
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
	if _, err := p.body(nil, req); err != nil {
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
		got, err := c.p.body(nil, c.req)
		if err != nil {
			t.Fatal(err)
		}
		c.req.Wire = nil
		params, _ := c.p.params(c.req)
		want, _ := json.Marshal(params)
		// as the SDK's NewStreaming sends it
		want = append(want[:len(want)-1], `,"stream":true}`...)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, got, want)
		}
	}
	_ = sdk.ChatCompletionNewParams{}
}

// The provider asks for the usage chunk and reports the
// prompt tokens the server's automatic cache served: a second request that
// repeats the first one's prefix reads it from the cache.
func TestUsageReportsCachedPromptTokens(t *testing.T) {
	srv := wiretest.NewOpenAI(func(wiretest.Request) wiretest.Reply { return wiretest.Reply{Text: "ok"} })
	defer srv.Close()
	p, err := New(&Options{APIKey: "k", BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := wiretest.Conversation([]byte{0, 2, 3, 2, 3, 2, 3, 0, 1, 0})
	w := &model.WireCache{}
	first, err := p.Complete(context.Background(), model.Request{System: "Be brief.", Tools: wireTools, Messages: msgs[:7], Settled: 5, SettledSeq: 5, Wire: w}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Complete(context.Background(), model.Request{System: "Be brief.", Tools: wireTools, Messages: msgs, Settled: 8, SettledSeq: 8, Wire: w}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.InputTokens == 0 || first.Usage.OutputTokens == 0 {
		t.Fatalf("first usage %+v: want input and output tokens", first.Usage)
	}
	if u := second.Usage; u.CachedInputTokens == 0 || u.UncachedInputTokens() <= 0 || u.CachedInputTokens > u.InputTokens {
		t.Fatalf("second usage %+v: want part of the input served from the prompt cache", u)
	}
	if !bytes.Contains(srv.Requests()[0].Body, []byte(`"stream_options":{"include_usage":true}`)) {
		t.Errorf("the request does not ask for the usage chunk: %s", srv.Requests()[0].Body)
	}
}

// BenchmarkBodyNewThread encodes the first request of a new thread each
// time: the system prompt differs (it names the thread), the tools do not,
// and there is no wire cache yet.
func BenchmarkBodyNewThread(b *testing.B) {
	p, err := New(&Options{APIKey: "k", BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil {
		b.Fatal(err)
	}
	var tools []model.ToolSpec
	for i := range 10 {
		tools = append(tools, model.ToolSpec{Name: fmt.Sprintf("tool_%d", i), Description: "A tool.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)})
	}
	req := model.Request{Tools: tools, Messages: []model.Message{{Role: model.RoleUser, Text: "loop"}}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		req.System = fmt.Sprintf("You are thread %d.", n)
		if _, err := p.body(nil, req); err != nil {
			b.Fatal(err)
		}
	}
}
