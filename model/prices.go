package model

import "strings"

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	Input, Output float64
	// CacheRead and CacheWrite are the prices of input tokens read from
	// and written to the provider's prompt cache.
	CacheRead, CacheWrite float64
}

// Cost returns what usage cost at p, in US dollars.
func (p Price) Cost(u Usage) float64 {
	uncached := max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0)
	return (float64(uncached)*p.Input + float64(u.CachedInputTokens)*p.CacheRead +
		float64(u.CacheWriteInputTokens)*p.CacheWrite + float64(u.OutputTokens)*p.Output) / 1e6
}

// prices are the list prices of the models gorap knows, by model-name
// prefix (the longest that matches wins), as the providers publish them
// for standard requests; they are defaults, to attribute spend, not bills.
var prices = []struct {
	prefix string
	price  Price
}{
	{"claude-opus-4-5", Price{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}},
	{"claude-opus-4", Price{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},
	{"claude-sonnet-4", Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
	{"claude-haiku-4", Price{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}},
	{"claude-3-5-haiku", Price{Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1}},
	{"gpt-4o-mini", Price{Input: 0.15, Output: 0.6, CacheRead: 0.075}},
	{"gpt-4o", Price{Input: 2.5, Output: 10, CacheRead: 1.25}},
	{"gpt-4.1-mini", Price{Input: 0.4, Output: 1.6, CacheRead: 0.1}},
	{"gpt-4.1", Price{Input: 2, Output: 8, CacheRead: 0.5}},
	{"gpt-5-mini", Price{Input: 0.25, Output: 2, CacheRead: 0.025}},
	{"gpt-5", Price{Input: 1.25, Output: 10, CacheRead: 0.125}},
	{"o4-mini", Price{Input: 1.1, Output: 4.4, CacheRead: 0.275}},
	{"o3", Price{Input: 2, Output: 8, CacheRead: 0.5}},
}

// PriceOf returns the list price of the model a provider names as
// "provider:model" (Provider.Name) or "model", and whether it is known.
func PriceOf(name string) (Price, bool) {
	if _, m, ok := strings.Cut(name, ":"); ok {
		name = m
	}
	name = strings.ToLower(strings.TrimSpace(name))
	best, found := Price{}, -1
	for _, p := range prices {
		if strings.HasPrefix(name, p.prefix) && len(p.prefix) > found {
			best, found = p.price, len(p.prefix)
		}
	}
	return best, found >= 0
}
