package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rap serve takes "session_budget" and "prices" from rap.json: it prints
// the budget, warns in its log that the model has no price (naming it and
// how to add one), and a root thread's state carries the budget; a bad
// price stops it with an error naming the model and the member.
func TestServeSessionBudget(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(`{"tool_sets": [], "session_budget": {"tokens": 2000000, "usd": 5},
		"prices": {"llama3.1": {"input": 0.1, "output": 0.2}}}`), 0o644)
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), cfg)
	info, stdout, stderr, _ := runningServe(t, s)
	wantLines(t, stdout.String(), "  budget:       2000000 tokens, $5.00 per session (\"session_budget\" in rap.json)")
	if log := stderr.String(); !strings.Contains(log, "the price of model scripted:") || !strings.Contains(log, `add its price in US dollars per million tokens to \"prices\" in rap.json`) {
		t.Errorf("log:\n%s\nwant a warning that the model has no price, and how to add one", log)
	}
	th := createThread(t, info.URL)
	st, err := rapClient(t, info.URL, "").Thread(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	if b := st.SessionBudget; b == nil || b.TokensLimit != 2000000 || b.USDLimit != 5 || b.Over {
		t.Errorf("session budget in the state = %+v; want rap.json's, not over", b)
	}

	os.WriteFile(cfg, []byte(`{"tool_sets": [], "prices": {"llama3.1": {"input": 0.1, "output": -2}}}`), 0o644)
	var out, errOut syncBuffer
	s.DataDir = filepath.Join(t.TempDir(), "data")
	err = serve(context.Background(), s, &out, &errOut, func(*server) { t.Error("rap serve started with a negative price") })
	if err == nil || !strings.Contains(err.Error(), `prices["llama3.1"].output: -2: want US dollars per million tokens`) {
		t.Errorf("a negative price: %v; want an error naming the model and the member", err)
	}
}
