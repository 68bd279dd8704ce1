package model

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// Prices are found by model-name prefix, the longest first, with or
// without the provider's prefix, and a cost counts cached and
// cache-written input at their own prices.
func TestPriceOf(t *testing.T) {
	p, ok := PriceOf("anthropic:claude-sonnet-4-5")
	if !ok || p.Input != 3 || p.Output != 15 {
		t.Fatalf("claude-sonnet-4-5: %+v, %v", p, ok)
	}
	mini, _ := PriceOf("gpt-4o-mini-2024-07-18")
	if mini.Input != 0.15 {
		t.Errorf("gpt-4o-mini took %+v; want its own price, not gpt-4o's", mini)
	}
	if _, ok := PriceOf("scripted:demo.json"); ok {
		t.Error("a scripted model has a price")
	}
	cost := mini.Cost(Usage{InputTokens: 1_000_000, CachedInputTokens: 500_000, OutputTokens: 100_000})
	want := (500_000*0.15 + 500_000*0.075 + 100_000*0.6) / 1e6
	if math.Abs(cost-want) > 1e-9 {
		t.Errorf("cost = %v; want %v", cost, want)
	}
}

// A price table replaces a list price under the list's own key, adds
// models the list does not know, leaves the list's other prices alone
// (a longer list key still wins), and refuses a negative price or a key
// written with its provider, naming the key.
func TestPriceTable(t *testing.T) {
	tbl, err := NewPriceTable(map[string]Price{
		"gpt-4o":      {Input: 2, Output: 8},
		"Llama3.1:8b": {Input: 0.1, Output: 0.2, CacheRead: 0.1, CacheWrite: 0.1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := tbl.Of("openai:gpt-4o-2024-08-06"); !ok || p.Input != 2 || p.Output != 8 {
		t.Errorf("gpt-4o = %+v, %v; want the table's own price", p, ok)
	}
	if p, _ := tbl.Of("openai:gpt-4o-mini"); p.Input != 0.15 {
		t.Errorf("gpt-4o-mini = %+v; want its list price, not the table's gpt-4o", p)
	}
	if p, ok := tbl.Of("openai:llama3.1:8b"); !ok || p.Output != 0.2 {
		t.Errorf("llama3.1:8b = %+v, %v; want the added price", p, ok)
	}
	if p, ok := tbl.Of("anthropic:claude-sonnet-4-5"); !ok || p.Input != 3 {
		t.Errorf("claude-sonnet-4-5 = %+v, %v; want its list price", p, ok)
	}
	if _, ok := tbl.Of("openai:qwen2.5"); ok {
		t.Error("a model neither the list nor the table knows has a price")
	}
	if _, err := NewPriceTable(map[string]Price{"GPT-4o": {}, "gpt-4o ": {}}); err == nil || !strings.Contains(err.Error(), `"GPT-4o" and "gpt-4o "`) {
		t.Errorf("two keys for one model: %v; want an error naming both", err)
	}
	var none *PriceTable
	if p, ok := none.Of("anthropic:claude-haiku-4-5"); !ok || p.Input != 1 {
		t.Errorf("a nil table gives %+v, %v; want the list price", p, ok)
	}
	for key, p := range map[string]Price{
		"gpt-4o":           {Input: -1, Output: 8},
		"openai:gpt-4o":    {Input: 1, Output: 1},
		" ":                {Input: 1, Output: 1},
		"claude-sonnet-4":  {Input: 1, Output: math.NaN()},
		"claude-haiku-4-5": {Input: 1, Output: 1, CacheRead: math.Inf(1)},
	} {
		_, err := NewPriceTable(map[string]Price{key: p, "other-model": {Input: 1, Output: 1}})
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("NewPriceTable(%q: %+v) = %v; want an error naming the key", key, p, err)
		}
	}
}
