package model_test

import (
	"context"
	"testing"

	"github.com/gorap/gorap/model"
)

// The table finds a model's published window by name prefix: dated
// snapshots and variants match their family, the longest prefix wins, a
// prefix matches only up to a separator, case and a routing prefix do not
// matter, and an unknown provider or model is reported unknown.
func TestContextWindowTable(t *testing.T) {
	for _, c := range []struct {
		provider, name string
		want           int
		known          bool
	}{
		{"anthropic", "claude-sonnet-4-5", 200_000, true},
		{"anthropic", "claude-sonnet-4-5-20250929", 200_000, true},
		{"anthropic", "claude-opus-4-1-20250805", 200_000, true},
		{"anthropic", "claude-haiku-4-5", 200_000, true},
		{"anthropic", "claude-3-5-haiku-latest", 200_000, true},
		{"anthropic", "claude-opus-5", 200_000, true}, // a later Claude: the family's least
		{"anthropic", "Claude-Sonnet-4-5", 200_000, true},
		{"openai", "gpt-4o", 128_000, true},
		{"openai", "gpt-4o-2024-08-06", 128_000, true},
		{"openai", "gpt-4o-mini", 128_000, true},
		{"openai", "gpt-4.1", 1_047_576, true},
		{"openai", "gpt-4.1-mini-2025-04-14", 1_047_576, true},
		{"openai", "gpt-4", 8_192, true},
		{"openai", "gpt-4-0613", 8_192, true},
		{"openai", "gpt-4-32k", 32_768, true},
		{"openai", "gpt-4-turbo-2024-04-09", 128_000, true},
		{"openai", "gpt-5", 400_000, true},
		{"openai", "gpt-5-mini", 400_000, true},
		{"openai", "gpt-5.1", 400_000, true},
		{"openai", "gpt-5-chat-latest", 128_000, true},
		{"openai", "o3", 200_000, true},
		{"openai", "o3-mini", 200_000, true},
		{"openai", "o4-mini-2025-04-16", 200_000, true},
		{"openai", "o1-mini", 128_000, true},
		{"openai", "openai/gpt-4o", 128_000, true},
		// A prefix matches only up to a separator.
		{"openai", "gpt-4oo", 0, false},
		{"openai", "o30", 0, false},
		// Unknown models and providers.
		{"openai", "llama3.1", 0, false},
		{"openai", "Qwen/Qwen2.5-7B-Instruct", 0, false},
		{"openai", "", 0, false},
		{"anthropic", "gpt-4o", 0, false},
		{"scripted", "demo.json", 0, false},
		{"", "claude-sonnet-4-5", 0, false},
	} {
		got, known := model.ContextWindow(c.provider, c.name)
		if got != c.want || known != c.known {
			t.Errorf("ContextWindow(%q, %q) = %d, %v; want %d, %v", c.provider, c.name, got, known, c.want, c.known)
		}
	}
}

// A provider's own figure (WindowReporter) wins over the table; without
// one, its Name "PROVIDER:MODEL" is looked up; a provider reporting 0 is
// looked up like one that reports nothing.
func TestProviderContextWindow(t *testing.T) {
	for _, c := range []struct {
		p     model.Provider
		want  int
		known bool
	}{
		{named{"anthropic:claude-sonnet-4-5"}, 200_000, true},
		{named{"openai:gpt-4.1"}, 1_047_576, true},
		{named{"openai:llama3.1"}, 0, false},
		{named{"scripted:demo.json (scripted test model — not a real LLM)"}, 0, false},
		{named{"no colon"}, 0, false},
		{reporting{named{"scripted:small.json"}, 8_000}, 8_000, true},
		{reporting{named{"openai:gpt-4o"}, 64_000}, 64_000, true},
		{reporting{named{"openai:gpt-4o"}, 0}, 128_000, true},
	} {
		got, known := model.ProviderContextWindow(c.p)
		if got != c.want || known != c.known {
			t.Errorf("%s: %d, %v; want %d, %v", c.p.Name(), got, known, c.want, c.known)
		}
	}
}

type named struct{ name string }

func (n named) Name() string         { return n.name }
func (n named) SupportsImages() bool { return false }
func (n named) Complete(context.Context, model.Request, model.Stream) (*model.Response, error) {
	return &model.Response{}, nil
}

type reporting struct {
	named
	window int
}

func (r reporting) ContextWindow() int { return r.window }
