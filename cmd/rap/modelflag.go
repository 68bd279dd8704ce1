package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/openai"
	"github.com/gorap/gorap/model/scripted"
)

// modelSpec is a parsed --model value: PROVIDER:MODEL.
type modelSpec struct {
	Provider string // anthropic, openai or scripted
	Arg      string // the model id, or the script path for scripted
}

func (s modelSpec) String() string {
	if s.Arg == "" {
		return s.Provider
	}
	return s.Provider + ":" + s.Arg
}

// modelProviders lists the providers --model accepts, for error messages.
const modelProviders = "anthropic:MODEL, openai:MODEL or scripted:PATH"

// parseModelSpec parses PROVIDER:MODEL. The model part may be empty for
// anthropic and openai (the provider's default model) but not for scripted.
// An empty spec picks a provider from the environment: anthropic when
// ANTHROPIC_API_KEY is set, else openai when OPENAI_API_KEY or
// OPENAI_BASE_URL is set.
func parseModelSpec(spec string, getenv func(string) string) (modelSpec, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		switch {
		case getenv(anthropic.EnvAPIKey) != "":
			return modelSpec{Provider: "anthropic"}, nil
		case getenv(openai.EnvAPIKey) != "" || getenv(openai.EnvBaseURL) != "":
			return modelSpec{Provider: "openai"}, nil
		}
		return modelSpec{}, fmt.Errorf("no model configured: pass --model %s (or set RAP_MODEL); for a real model set %s or OPENAI_API_KEY/OPENAI_BASE_URL", modelProviders, anthropic.EnvAPIKey)
	}
	provider, arg, _ := strings.Cut(spec, ":")
	switch provider {
	case "anthropic", "openai":
	case "scripted":
		if arg == "" {
			return modelSpec{}, fmt.Errorf("model %q: scripted needs the path of a script file, as in scripted:demo.json", spec)
		}
	default:
		return modelSpec{}, fmt.Errorf("model %q: unknown provider %q; want %s", spec, provider, modelProviders)
	}
	return modelSpec{Provider: provider, Arg: arg}, nil
}

// newModel builds the provider a spec names. API keys and base URLs come
// from the environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
// OPENAI_API_KEY, OPENAI_BASE_URL); a missing key is an error naming the
// variable. hc may be nil.
func newModel(spec modelSpec, hc *http.Client) (model.Provider, error) {
	switch spec.Provider {
	case "anthropic":
		p, err := anthropic.New(&anthropic.Options{Model: spec.Arg, HTTPClient: hc})
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", spec, err)
		}
		return p, nil
	case "openai":
		return newOpenAIModel(spec, hc)
	case "scripted":
		return newScriptedModel(spec)
	}
	return nil, fmt.Errorf("model %s: unknown provider; want %s", spec, modelProviders)
}

// describeModel is the line "rap serve" and "rap demo" print about the model.
func describeModel(p model.Provider) string {
	name := p.Name()
	if strings.HasPrefix(name, "scripted") && !strings.Contains(name, "not a real LLM") {
		name += " (scripted test model — not a real LLM)"
	}
	return name
}

// getenvOS is os.Getenv, named for passing as a func value.
func getenvOS(k string) string { return os.Getenv(k) }

func newOpenAIModel(spec modelSpec, hc *http.Client) (model.Provider, error) {
	p, err := openai.New(&openai.Options{Model: spec.Arg, HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", spec, err)
	}
	return p, nil
}

func newScriptedModel(spec modelSpec) (model.Provider, error) {
	m, err := scripted.Load(spec.Arg)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", spec, err)
	}
	return m, nil
}
