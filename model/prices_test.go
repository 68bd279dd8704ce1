package model

import (
	"math"
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
