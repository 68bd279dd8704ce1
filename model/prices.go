package model

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

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

// check refuses a price that is negative, not a number or infinite.
func (p Price) check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cache_write", p.CacheWrite}, {"cache_read", p.CacheRead}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s price %v: want US dollars per million tokens, 0 or more", f.name, f.v)
		}
	}
	return nil
}

// defaultPrices are the list prices of the models gorap knows, by
// model-name prefix (the longest that matches wins), as the providers
// publish them for standard requests; they are defaults, to attribute
// spend, not bills.
var defaultPrices = []priceEntry{
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

// priceEntry is one row of a price table: the price of the models whose
// name starts with prefix.
type priceEntry struct {
	prefix string
	price  Price
}

// defaultTable is the price table without additions.
var defaultTable = &PriceTable{entries: defaultPrices}

// PriceOf returns the list price of the model a provider names as
// "provider:model" (Provider.Name) or "model", and whether it is known.
func PriceOf(name string) (Price, bool) {
	return defaultTable.Of(name)
}

// DefaultPrices returns the list prices gorap knows, by model-name
// prefix, as PriceOf uses them.
func DefaultPrices() map[string]Price {
	out := make(map[string]Price, len(defaultPrices))
	for _, e := range defaultPrices {
		out[e.prefix] = e.price
	}
	return out
}

// PriceTable finds the price of a model by its name: the list prices
// gorap knows (PriceOf), with an operator's own prices (rap.json
// "prices") replacing or adding to them. A nil *PriceTable is the list
// prices alone.
type PriceTable struct {
	entries []priceEntry
}

// NewPriceTable returns the list prices with the prices of extra, keyed
// by model name (without the provider, such as "claude-sonnet-4-5" or
// "llama3.1:8b"): a key that is one of the list's replaces its price, any
// other is added. As in the list, a key is a prefix: it prices every
// model whose name starts with it, and of the keys that match a name the
// longest wins. Keys are matched without case. A key that is empty,
// starts with a provider ("openai:gpt-4o") or names what another key
// does, or a price that is negative, is an error naming the key.
func NewPriceTable(extra map[string]Price) (*PriceTable, error) {
	byPrefix := map[string]Price{}
	for _, e := range defaultPrices {
		byPrefix[e.prefix] = e.price
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	given := map[string]string{}
	for _, k := range keys {
		name := normalModelName(k)
		if prev, ok := given[name]; ok {
			return nil, fmt.Errorf("%q and %q name the same models (case and spaces do not count): keep one", prev, k)
		}
		given[name] = k
		if name == "" {
			return nil, fmt.Errorf("%q: want a model name such as \"claude-sonnet-4-5\"", k)
		}
		if provider, rest, ok := strings.Cut(name, ":"); ok && knownProviders[provider] {
			return nil, fmt.Errorf("%q: write the model name without its provider, such as %q", k, rest)
		}
		if err := extra[k].check(); err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		byPrefix[name] = extra[k]
	}
	t := &PriceTable{entries: make([]priceEntry, 0, len(byPrefix))}
	for p, price := range byPrefix {
		t.entries = append(t.entries, priceEntry{p, price})
	}
	sort.Slice(t.entries, func(i, j int) bool { return t.entries[i].prefix < t.entries[j].prefix })
	return t, nil
}

// knownProviders are the provider names of Provider.Name, which a price's
// key must not start with.
var knownProviders = map[string]bool{"anthropic": true, "openai": true, "scripted": true}

// normalModelName is a model name as prices are looked up: trimmed and
// in lower case.
func normalModelName(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}

// Of returns the price of the model a provider names as
// "provider:model" (Provider.Name) or "model", and whether it is known.
func (t *PriceTable) Of(name string) (Price, bool) {
	if t == nil {
		t = defaultTable
	}
	if _, m, ok := strings.Cut(name, ":"); ok {
		name = m
	}
	name = normalModelName(name)
	best, found := Price{}, -1
	for _, p := range t.entries {
		if strings.HasPrefix(name, p.prefix) && len(p.prefix) > found {
			best, found = p.price, len(p.prefix)
		}
	}
	return best, found >= 0
}
