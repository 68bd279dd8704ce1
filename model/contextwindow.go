package model

// This file owns what the runtime knows of each model's context window:
// a table of the published windows of the Anthropic and OpenAI models,
// looked up by model name, and the optional interface through which a
// provider declares its own.

import (
	"context"
	"strings"
)

// WindowReporter is implemented by a Provider that knows the context
// window of its model. It is optional: the runtime asks for it with a type
// assertion, and takes ContextWindow's answer over the table's when it is
// positive. The scripted test model implements it (a script's
// "context_window").
type WindowReporter interface {
	// ContextWindow returns the model's context window in tokens, or 0
	// when it does not know.
	ContextWindow() int
}

// DefaultContextWindow is the window, in tokens, the runtime assumes for a
// model whose window neither its configuration, its provider nor the
// table gives: the smallest window of the current models of both
// providers (GPT-4o), so that a model is never sent more than it takes.
const DefaultContextWindow = 128_000

// contextWindows are the context windows, in tokens, of the models of
// each provider, by model name prefix. A name matches a prefix when it
// starts with it and the prefix ends there or is followed by '-', '.',
// '@', ':' or '_' (a dated snapshot, a version, a variant): "gpt-4o"
// matches "gpt-4o-2024-08-06" and "gpt-4o-mini", not "gpt-4o1"; "gpt-4"
// does not match "gpt-4o". The longest matching prefix wins.
//
// The figures are the providers' published defaults, as their model pages
// state them: what every request gets without opting into more. A larger
// window that needs a beta header or a special tier is left out (gorap
// sends no such header); set it with runtime.Config.ContextWindow (rap
// serve --context-window) when you have it.
var contextWindows = map[string]map[string]int{
	"anthropic": {
		// Anthropic's models overview (platform.claude.com/docs, "Models
		// overview" and each model's page): every Claude model since
		// Claude 3 has a 200K-token window. Sonnet 4, Sonnet 4.5 and
		// Opus 4.6 take 1M tokens only with the context-1m beta header,
		// so 200K is their default here.
		"claude-opus-4":   200_000,
		"claude-sonnet-4": 200_000,
		"claude-haiku-4":  200_000,
		"claude-3":        200_000,
		// A later Claude name not listed above: 200K is the least any
		// Claude model the API serves has.
		"claude": 200_000,
	},
	"openai": {
		// OpenAI's model pages (platform.openai.com/docs/models/NAME),
		// "Context window".
		"gpt-4o":        128_000,
		"gpt-4-turbo":   128_000,
		"gpt-4":         8_192,
		"gpt-4-32k":     32_768,
		"gpt-4.1":       1_047_576,
		"gpt-3.5-turbo": 16_385,
		"gpt-5":         400_000,
		// The chat snapshots of GPT-5 have a smaller window than the
		// reasoning models they are named after.
		"gpt-5-chat":   128_000,
		"gpt-5.1-chat": 128_000,
		"gpt-5.2-chat": 128_000,
		"o1":           200_000,
		"o1-mini":      128_000,
		"o1-preview":   128_000,
		"o3":           200_000,
		"o4-mini":      200_000,
	},
}

// ContextWindow returns the published context window, in tokens, of the
// model name of provider ("anthropic" or "openai", as in --model
// PROVIDER:MODEL), matched by name prefix so that dated snapshots
// ("claude-sonnet-4-5-20250929", "gpt-4o-2024-08-06") find their family.
// A name given with a routing prefix ("openai/gpt-4o") is looked up
// without it. known is false for a provider or model the table does not
// list (a local model behind the OpenAI provider, the scripted test
// model); tokens is then 0.
func ContextWindow(provider, name string) (tokens int, known bool) {
	table := contextWindows[strings.ToLower(provider)]
	name = strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best := ""
	for prefix, n := range table {
		if len(prefix) > len(best) && matchesPrefix(name, prefix) {
			best, tokens = prefix, n
		}
	}
	return tokens, best != ""
}

// matchesPrefix reports whether name is prefix or starts with prefix and
// a separator.
func matchesPrefix(name, prefix string) bool {
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	if len(name) == len(prefix) {
		return true
	}
	return strings.IndexByte("-.@:_", name[len(prefix)]) >= 0
}

// ProviderContextWindow returns the context window of p's model: what p
// reports (WindowReporter) when positive, else the table's entry for the
// model its Name gives ("PROVIDER:MODEL"). known is false when neither
// says.
func ProviderContextWindow(p Provider) (tokens int, known bool) {
	if w, ok := p.(WindowReporter); ok {
		if n := w.ContextWindow(); n > 0 {
			return n, true
		}
	}
	provider, name, ok := strings.Cut(p.Name(), ":")
	if !ok {
		return 0, false
	}
	if i := strings.IndexByte(name, ' '); i >= 0 {
		name = name[:i] // "scripted:demo.json (scripted test model …)"
	}
	return ContextWindow(provider, name)
}

// TokenCounter is a Provider that can count the input tokens of a request
// exactly, as its API does (Anthropic's count_tokens endpoint). Counting
// costs a request, so the runtime asks only when its estimate says a
// request is past the point where the thread compacts: a count under it
// spares a compaction the estimate would have made.
type TokenCounter interface {
	// CountTokens returns the input tokens req takes for the provider's
	// model.
	CountTokens(ctx context.Context, req Request) (int, error)
}
