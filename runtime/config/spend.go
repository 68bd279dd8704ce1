package config

// This file owns what a config file says about model spend: the budget
// of each session ("session_budget": the most tokens and US dollars the
// completions of a session's threads may use) and the prices those
// dollars are counted at ("prices": per model, per million tokens, over
// the list prices gorap knows, model.PriceOf). They map to
// runtime.Config.SessionBudget and runtime.Config.Prices.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gorap/gorap/internal/spelling"
	"github.com/gorap/gorap/model"
)

// spendKeys are the top-level members of a config file this file reads.
var spendKeys = []string{"session_budget", "prices"}

// budgetKeys are the members of a "session_budget" object.
var budgetKeys = []string{"tokens", "usd"}

// priceKeys are the members of one model's entry of "prices".
var priceKeys = []string{"input", "output", "cache_write", "cache_read"}

// sessionBudgetExample and pricesExample show the members' form in
// errors.
const (
	sessionBudgetExample = `{"tokens": 2000000, "usd": 5}`
	pricesExample        = `{"llama3.1": {"input": 0.1, "output": 0.2}}`
)

// parseFileSpend reads the "session_budget" and "prices" members of a
// config file into f; each is nil when absent.
func parseFileSpend(f *File, budget, prices json.RawMessage, name string) error {
	if budget != nil {
		b, err := parseSessionBudget(budget, name)
		if err != nil {
			return err
		}
		f.SessionBudget = b
	}
	if prices != nil {
		p, err := parsePrices(prices, name)
		if err != nil {
			return err
		}
		f.Prices = p
	}
	return nil
}

// parseSessionBudget reads a "session_budget": an object of "tokens" (a
// whole number) and "usd" (a number), neither negative, one above 0.
func parseSessionBudget(raw json.RawMessage, name string) (*Budget, error) {
	const path = "session_budget"
	want := fmt.Sprintf("want %s: the most tokens (input and output) and US dollars the model may use in one session; give at least one of them, above 0", sessionBudgetExample)
	members, err := objectMembers(raw, budgetKeys, name, path, want)
	if err != nil {
		return nil, err
	}
	b := &Budget{}
	if v, ok := members["tokens"]; ok {
		n, err := wholeNumber(v)
		if err != nil || n < 0 {
			return nil, &Error{File: name, Path: path + ".tokens", Problem: fmt.Sprintf("%s: want a whole number of tokens, 0 or more, such as 2000000", v)}
		}
		b.Tokens = n
	}
	if v, ok := members["usd"]; ok {
		x, err := dollarAmount(v)
		if err != nil {
			return nil, &Error{File: name, Path: path + ".usd", Problem: fmt.Sprintf("%s: want US dollars, 0 or more, such as 5 or 0.5", v)}
		}
		b.USD = x
	}
	if b.Tokens == 0 && b.USD == 0 {
		return nil, &Error{File: name, Path: path, Problem: "no limit above 0; " + want}
	}
	return b, nil
}

// parsePrices reads "prices": an object mapping a model name to its
// prices per million tokens. "input" and "output" are required;
// "cache_read" and "cache_write" default to "input".
func parsePrices(raw json.RawMessage, name string) (map[string]model.Price, error) {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return nil, &Error{File: name, Path: "prices", Problem: fmt.Sprintf("want an object of models' prices in US dollars per million tokens, such as %s", pricesExample)}
	}
	out := make(map[string]model.Price, len(entries))
	for _, key := range slices.Sorted(maps.Keys(entries)) {
		path := fmt.Sprintf("prices[%q]", key)
		want := `want {"input": X, "output": Y, "cache_write": X, "cache_read": X}: US dollars per million tokens; "input" and "output" are required, the cache's prices default to "input"`
		members, err := objectMembers(entries[key], priceKeys, name, path, want)
		if err != nil {
			return nil, err
		}
		p := model.Price{CacheWrite: math.NaN(), CacheRead: math.NaN()}
		fields := map[string]*float64{"input": &p.Input, "output": &p.Output, "cache_write": &p.CacheWrite, "cache_read": &p.CacheRead}
		for _, k := range []string{"input", "output"} {
			if _, ok := members[k]; !ok {
				return nil, &Error{File: name, Path: path + "." + k, Problem: "missing; " + want}
			}
		}
		for _, k := range priceKeys {
			v, ok := members[k]
			if !ok {
				continue
			}
			x, err := dollarAmount(v)
			if err != nil {
				return nil, &Error{File: name, Path: path + "." + k, Problem: fmt.Sprintf("%s: want US dollars per million tokens, 0 or more, such as 3 or 0.15", v)}
			}
			*fields[k] = x
		}
		if math.IsNaN(p.CacheWrite) {
			p.CacheWrite = p.Input
		}
		if math.IsNaN(p.CacheRead) {
			p.CacheRead = p.Input
		}
		out[key] = p
	}
	if _, err := model.NewPriceTable(out); err != nil {
		return nil, &Error{File: name, Path: "prices", Problem: err.Error()}
	}
	return out, nil
}

// objectMembers decodes raw as a JSON object whose members are all among
// known: a member that is not is an error naming it (with the known
// member it is likely a misspelling of).
func objectMembers(raw json.RawMessage, known []string, name, path, want string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, &Error{File: name, Path: path, Problem: want}
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if slices.Contains(known, k) {
			continue
		}
		problem := fmt.Sprintf("unknown member %q", k)
		for _, w := range known {
			if squash(k) == squash(w) || spelling.Distance(k, w) <= 2 {
				problem += fmt.Sprintf(" (did you mean %q?)", w)
				break
			}
		}
		return nil, &Error{File: name, Path: path, Problem: problem + "; the members are " + quoteAll(known)}
	}
	return obj, nil
}

// quoteAll writes names quoted and joined: "a", "b" and "c".
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// jsonNumber reads a JSON number (not a string holding one).
func jsonNumber(raw json.RawMessage) (json.Number, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	n, ok := v.(json.Number)
	if !ok {
		return "", fmt.Errorf("%s is not a number", raw)
	}
	return n, nil
}

// wholeNumber reads a JSON whole number.
func wholeNumber(raw json.RawMessage) (int64, error) {
	n, err := jsonNumber(raw)
	if err != nil {
		return 0, err
	}
	return n.Int64()
}

// dollarAmount reads a JSON number that is 0 or more.
func dollarAmount(raw json.RawMessage) (float64, error) {
	n, err := jsonNumber(raw)
	if err != nil {
		return 0, err
	}
	x, err := n.Float64()
	if err != nil || x < 0 || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%s is not an amount", n)
	}
	return x, nil
}
