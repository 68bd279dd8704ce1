package config

import (
	"bytes"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The retention: RAP_RETENTION, --retention (the flag wins) and a config
// file's "retention" (used when neither is set; the first file that sets
// it wins); 0 keeps sessions for ever; values under a minute, negative
// ones and non-durations are refused with an error naming where they
// came from; a misspelt "retention" is refused with a "did you mean".
func TestRetentionSettings(t *testing.T) {
	env := map[string]string{EnvRetention: "48h"}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.EffectiveRetention(nil) != 48*time.Hour {
		t.Fatalf("from env: %v, want 48h", s.EffectiveRetention(nil))
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--retention", "720h"}); err != nil {
		t.Fatal(err)
	}
	file, err := Parse([]byte(`{"tool_sets": [], "retention": "24h"}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.EffectiveRetention(file); got != 720*time.Hour {
		t.Errorf("flag and file: %v, want the flag's 720h", got)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("settings", "settings", s)
	if !strings.Contains(logs.String(), "settings.retention=720h0m0s") {
		t.Errorf("the start-up log should show the retention: %s", logs.String())
	}
	none := Defaults(func(string) string { return "/h" })
	if got := none.EffectiveRetention(file); got != 24*time.Hour {
		t.Errorf("file only: %v, want its 24h", got)
	}
	if got := none.EffectiveRetention(nil); got != 0 {
		t.Errorf("nothing set: %v, want 0 (keep for ever)", got)
	}
	other, err := Parse([]byte(`{"tool_sets": [], "retention": "0"}`), "user.json")
	if err != nil {
		t.Fatal(err)
	}
	file.Merge(other)
	if got := none.EffectiveRetention(file); got != 24*time.Hour {
		t.Errorf("merged: %v, want the first file's 24h", got)
	}

	for _, bad := range []string{"30s", "-1h", "soon"} {
		if _, err := FromEnv(func(k string) string {
			if k == EnvRetention {
				return bad
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), EnvRetention) || !strings.Contains(err.Error(), "at least 1m0s") {
			t.Errorf("%s=%q: err = %v, want one naming the variable and the minimum", EnvRetention, bad, err)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		s := Defaults(func(string) string { return "/h" })
		s.RegisterFlags(fs)
		if err := fs.Parse([]string{"--retention", bad}); err == nil || !strings.Contains(err.Error(), "retention") {
			t.Errorf("--retention %q: err = %v, want one naming the flag", bad, err)
		}
		if _, err := Parse([]byte(`{"tool_sets": [], "retention": "`+bad+`"}`), "rap.json"); err == nil ||
			!strings.Contains(err.Error(), "rap.json: retention:") || !strings.Contains(err.Error(), "at least 1m0s") {
			t.Errorf(`file "retention": %q: err = %v, want one naming the file, the member and the minimum`, bad, err)
		}
	}
	if _, err := Parse([]byte(`{"tool_sets": [], "retention": 720}`), "rap.json"); err == nil || !strings.Contains(err.Error(), `"720h"`) {
		t.Errorf("a number as retention: err = %v, want one asking for a string such as \"720h\"", err)
	}
	for _, doc := range []string{`{"tool_sets": [], "retension": "720h"}`, `{"retension": "720h"}`} {
		if _, err := Parse([]byte(doc), "rap.json"); err == nil || !strings.Contains(err.Error(), `did you mean "retention"?`) {
			t.Errorf("%s: err = %v, want a did-you-mean naming retention", doc, err)
		}
	}
}
