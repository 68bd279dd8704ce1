package config

import (
	"strings"
	"testing"
)

// "session_budget" is read with its tokens and dollars; one without a
// limit above 0, a negative or fractional limit, or an unknown member is
// refused with an error naming the member (a misspelling with what it is
// likely meant to be), and so is a misspelt "session_budget" itself. The
// first file that sets it wins.
func TestSessionBudget(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [], "session_budget": {"tokens": 2000000, "usd": 5.5}}`), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	if b := f.SessionBudget; b == nil || b.Tokens != 2000000 || b.USD != 5.5 {
		t.Fatalf("session budget = %+v; want 2000000 tokens and $5.50", b)
	}
	for _, c := range []struct{ body, want string }{
		{`"session_budget": {}`, "session_budget: no limit above 0"},
		{`"session_budget": {"tokens": 0, "usd": 0}`, "session_budget: no limit above 0"},
		{`"session_budget": {"tokens": -5}`, "session_budget.tokens: -5: want a whole number"},
		{`"session_budget": {"tokens": 1.5}`, "session_budget.tokens: 1.5: want a whole number"},
		{`"session_budget": {"usd": -1}`, "session_budget.usd: -1: want US dollars"},
		{`"session_budget": {"usd": "5"}`, `session_budget.usd: "5": want US dollars`},
		{`"session_budget": {"token": 5}`, `session_budget: unknown member "token" (did you mean "tokens"?)`},
		{`"session_budget": {"tokens": 5, "dollars": 5}`, `session_budget: unknown member "dollars"; the members are "tokens" and "usd"`},
		{`"session_budget": 5`, "session_budget: want {"},
		{`"session-budget": {"tokens": 5}`, `"session-budget" (did you mean "session_budget"?)`},
	} {
		_, err := Parse([]byte(`{"tool_sets": [], `+c.body+`}`), "a.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.body, err, c.want)
		}
	}
	other, _ := Parse([]byte(`{"tool_sets": [], "session_budget": {"tokens": 5}}`), "b.json")
	f.Merge(other)
	if f.SessionBudget.Tokens != 2000000 {
		t.Errorf("merged session budget = %+v; want the first file's", f.SessionBudget)
	}
	none := &File{}
	none.Merge(other)
	if none.SessionBudget == nil || none.SessionBudget.Tokens != 5 {
		t.Errorf("merged into a file without one: %+v; want the second file's", none.SessionBudget)
	}
}

// "prices" maps model names to prices per million tokens: the cache's
// prices default to the input price; a missing input or output price, a
// negative one, an unknown member, a key written with its provider and a
// misspelt "prices" are refused with errors naming the model and the
// member. Of two files pricing one model, the first wins.
func TestPrices(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [], "prices": {
		"llama3.1": {"input": 0.1, "output": 0.2},
		"claude-sonnet-4-5": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}}}`), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	if p := f.Prices["llama3.1"]; p.Input != 0.1 || p.Output != 0.2 || p.CacheRead != 0.1 || p.CacheWrite != 0.1 {
		t.Errorf("llama3.1 = %+v; want its cache prices to default to its input price", p)
	}
	if p := f.Prices["claude-sonnet-4-5"]; p.CacheWrite != 3.75 || p.CacheRead != 0.3 {
		t.Errorf("claude-sonnet-4-5 = %+v; want its own cache prices", p)
	}
	for _, c := range []struct{ body, want string }{
		{`"prices": {"m": {"input": 1}}`, `prices["m"].output: missing`},
		{`"prices": {"m": {"output": 1}}`, `prices["m"].input: missing`},
		{`"prices": {"m": {"input": -1, "output": 1}}`, `prices["m"].input: -1: want US dollars per million tokens, 0 or more`},
		{`"prices": {"m": {"input": 1, "output": 1, "cache_reads": 1}}`, `prices["m"]: unknown member "cache_reads" (did you mean "cache_read"?)`},
		{`"prices": {"m": {"input": 1, "output": 1, "currency": "EUR"}}`, `prices["m"]: unknown member "currency"`},
		{`"prices": {"openai:gpt-4o": {"input": 1, "output": 1}}`, `prices: "openai:gpt-4o": write the model name without its provider, such as "gpt-4o"`},
		{`"prices": {"m": 3}`, `prices["m"]: want {"input"`},
		{`"prices": []`, `prices: want an object`},
		{`"price": {"m": {"input": 1, "output": 1}}`, `"price" (did you mean "prices"?)`},
	} {
		_, err := Parse([]byte(`{"tool_sets": [], `+c.body+`}`), "a.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.body, err, c.want)
		}
	}
	other, _ := Parse([]byte(`{"tool_sets": [], "prices": {"llama3.1": {"input": 9, "output": 9}, "qwen2.5": {"input": 0, "output": 0}}}`), "b.json")
	f.Merge(other)
	if f.Prices["llama3.1"].Input != 0.1 || len(f.Prices) != 3 {
		t.Errorf("merged prices = %+v; want the first file's llama3.1 and the second's qwen2.5 added", f.Prices)
	}
}
