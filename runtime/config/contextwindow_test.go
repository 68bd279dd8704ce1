package config

import (
	"bytes"
	"flag"
	"log/slog"
	"strings"
	"testing"
)

// The context window and the share of it a result may take:
// RAP_CONTEXT_WINDOW and RAP_MAX_RESULT_SHARE, --context-window and
// --max-result-share (the flags win), and a config file's
// "context_window" and "max_result_share" (used when neither is set; the
// first file that sets each wins); 0 leaves each to the runtime.
func TestContextWindowSettings(t *testing.T) {
	env := map[string]string{EnvContextWindow: "64000", EnvMaxResultShare: "0.2"}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.EffectiveContextWindow(nil) != 64000 || s.EffectiveMaxResultShare(nil) != 0.2 {
		t.Fatalf("from env: %d, %v; want 64000, 0.2", s.EffectiveContextWindow(nil), s.EffectiveMaxResultShare(nil))
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--context-window", "200000", "--max-result-share", "0.05"}); err != nil {
		t.Fatal(err)
	}
	file, err := Parse([]byte(`{"tool_sets": [], "context_window": 32000, "max_result_share": 0.5}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	if w, sh := s.EffectiveContextWindow(file), s.EffectiveMaxResultShare(file); w != 200000 || sh != 0.05 {
		t.Errorf("flags and file: %d, %v; want the flags' 200000, 0.05", w, sh)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("settings", "settings", s)
	if !strings.Contains(logs.String(), "settings.context_window=200000") || !strings.Contains(logs.String(), "settings.max_result_share=0.05") {
		t.Errorf("the start-up log should show both: %s", logs.String())
	}
	none := Defaults(func(string) string { return "/h" })
	if w, sh := none.EffectiveContextWindow(file), none.EffectiveMaxResultShare(file); w != 32000 || sh != 0.5 {
		t.Errorf("file only: %d, %v; want its 32000, 0.5", w, sh)
	}
	if w, sh := none.EffectiveContextWindow(nil), none.EffectiveMaxResultShare(nil); w != 0 || sh != 0 {
		t.Errorf("nothing set: %d, %v; want 0, 0 (the runtime's)", w, sh)
	}
	other, err := Parse([]byte(`{"tool_sets": [], "context_window": 1000000, "max_result_share": 1}`), "user.json")
	if err != nil {
		t.Fatal(err)
	}
	file.Merge(other)
	if w, sh := none.EffectiveContextWindow(file), none.EffectiveMaxResultShare(file); w != 32000 || sh != 0.5 {
		t.Errorf("merged: %d, %v; want the first file's", w, sh)
	}
	zero, err := FromEnv(func(k string) string { return map[string]string{EnvContextWindow: "0", EnvMaxResultShare: "0"}[k] })
	if err != nil || zero.EffectiveContextWindow(file) != 0 || zero.EffectiveMaxResultShare(file) != 0 {
		t.Errorf("0 set in the environment: %v; want 0 winning over the file", err)
	}
}

// Bad values are refused with an error that names the variable, the flag
// or the file's member, and says what is wanted: negative numbers, words,
// a window too small or too large, a fraction of a token, a share over 1.
func TestContextWindowSettingsRefuseBadValues(t *testing.T) {
	for _, c := range []struct {
		env, flagName, member, value, want string
	}{
		{EnvContextWindow, "context-window", "context_window", "-1", "whole number of tokens from 1000"},
		{EnvContextWindow, "context-window", "context_window", "lots", "whole number of tokens from 1000"},
		{EnvContextWindow, "context-window", "context_window", "500", "whole number of tokens from 1000"},
		{EnvContextWindow, "context-window", "context_window", "1000000000", "to 100000000"},
		{EnvContextWindow, "context-window", "context_window", "8000.5", "whole number"},
		{EnvMaxResultShare, "max-result-share", "max_result_share", "-0.1", "above 0 and at most 1"},
		{EnvMaxResultShare, "max-result-share", "max_result_share", "1.5", "above 0 and at most 1"},
		{EnvMaxResultShare, "max-result-share", "max_result_share", "half", "above 0 and at most 1"},
	} {
		if _, err := FromEnv(func(k string) string {
			if k == c.env {
				return c.value
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), c.env) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%q: err = %v; want one naming the variable and %q", c.env, c.value, err, c.want)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		s := Defaults(func(string) string { return "/h" })
		s.RegisterFlags(fs)
		if err := fs.Parse([]string{"--" + c.flagName, c.value}); err == nil || !strings.Contains(err.Error(), c.flagName) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--%s %q: err = %v; want one naming the flag and %q", c.flagName, c.value, err, c.want)
		}
		value := c.value
		if value == "lots" || value == "half" {
			value = `"` + value + `"` // a word is a JSON string in a file
		}
		if _, err := Parse([]byte(`{"tool_sets": [], "`+c.member+`": `+value+`}`), "rap.json"); err == nil ||
			!strings.Contains(err.Error(), "rap.json: "+c.member+":") {
			t.Errorf("file %q: %s: err = %v; want one naming the file and the member", c.member, value, err)
		}
	}
	if _, err := Parse([]byte(`{"tool_sets": [], "context_window": "lots"}`), "rap.json"); err == nil || !strings.Contains(err.Error(), "such as 200000") {
		t.Errorf("a word as context_window: err = %v", err)
	}
	if _, err := Parse([]byte(`{"tool_sets": [], "max_result_share": [0.1]}`), "rap.json"); err == nil || !strings.Contains(err.Error(), "such as 0.1") {
		t.Errorf("a list as max_result_share: err = %v", err)
	}
}

// A misspelt "context_window" or "max_result_share" in a config file is
// refused with a "did you mean", so a typo never leaves the model's
// window to the default unnoticed.
func TestContextWindowMisspelt(t *testing.T) {
	for doc, want := range map[string]string{
		`{"tool_sets": [], "context_windw": 200000}`:                          `did you mean "context_window"?`,
		`{"tool_sets": [], "contextWindow": 200000}`:                          `did you mean "context_window"?`,
		`{"tool_sets": [], "max_results_share": 0.2}`:                         `did you mean "max_result_share"?`,
		`{"context-window": 200000}`:                                          `did you mean "context_window"?`,
		`{"tool_sets": [], "context_window": 200000, "max_result_shar": 0.1}`: `did you mean "max_result_share"?`,
	} {
		if _, err := Parse([]byte(doc), "rap.json"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v; want %s", doc, err, want)
		}
	}
	// The other members' near-miss checks still work beside these.
	if _, err := Parse([]byte(`{"tool_sets": [], "context_window": 200000, "retension": "720h"}`), "rap.json"); err == nil || !strings.Contains(err.Error(), `did you mean "retention"?`) {
		t.Errorf("a misspelt retention beside context_window: err = %v", err)
	}
}
