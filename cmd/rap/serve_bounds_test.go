package main

import (
	"strings"
	"testing"
)

// rap serve reads the context window and the share of it one result may
// take from --context-window and --max-result-share or
// RAP_CONTEXT_WINDOW and RAP_MAX_RESULT_SHARE, and refuses bad values
// with an error naming the flag.
func TestServeContextWindowSetting(t *testing.T) {
	clearRAPEnv(t)
	s, err := serveSettingsFor("--context-window", "131072", "--max-result-share", "0.25")
	if err != nil || s.EffectiveContextWindow(nil) != 131072 || s.EffectiveMaxResultShare(nil) != 0.25 {
		t.Fatalf("flags: %v, %v, %v", s.ContextWindow, s.MaxResultShare, err)
	}
	t.Setenv("RAP_CONTEXT_WINDOW", "32000")
	t.Setenv("RAP_MAX_RESULT_SHARE", "0.5")
	s, err = serveSettingsFor()
	if err != nil || s.EffectiveContextWindow(nil) != 32000 || s.EffectiveMaxResultShare(nil) != 0.5 {
		t.Fatalf("environment: %v, %v, %v", s.ContextWindow, s.MaxResultShare, err)
	}
	for _, args := range [][]string{{"--context-window", "-5"}, {"--context-window", "big"}, {"--max-result-share", "2"}} {
		if _, err := serveSettingsFor(args...); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%v: err = %v, want one naming the flag", args, err)
		}
	}
}
