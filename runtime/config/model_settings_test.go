package config

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

// The model call limits come from RAP_MODEL_* and the
// --model-* flags (the flags win); 0 keeps the runtime's defaults; a
// malformed value is an error naming the variable.
func TestModelSettings(t *testing.T) {
	env := map[string]string{EnvModelIdleTimeout: "30s", EnvModelTimeout: "5m", EnvModelAttempts: "3", EnvModelRetryBackoff: "2s"}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.ModelIdleTimeout != 30*time.Second || s.ModelTimeout != 5*time.Minute || s.ModelAttempts != 3 || s.ModelRetryBackoff != 2*time.Second {
		t.Fatalf("from env: %+v", s)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--model-idle-timeout", "10s", "--model-attempts", "1"}); err != nil {
		t.Fatal(err)
	}
	if s.ModelIdleTimeout != 10*time.Second || s.ModelAttempts != 1 || s.ModelTimeout != 5*time.Minute {
		t.Fatalf("flags must override env: %+v", s)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{EnvModelIdleTimeout: "soon", EnvModelTimeout: "-1s", EnvModelAttempts: "many", EnvModelRetryBackoff: "1"} {
		_, err := FromEnv(func(k string) string {
			if k == name {
				return bad
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", name, bad, err)
		}
	}
	s = Defaults(func(string) string { return "/h" })
	s.ModelAttempts = -1
	if err := s.Check(); err == nil {
		t.Error("Check accepted a negative ModelAttempts")
	}
}
