package config

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// The hosts besides a tool's own to which a user's
// choice may be POSTed are configurable, from the environment
// (comma-separated) or repeated flags, and flags replace the
// environment's list.
func TestChoiceResponseHosts(t *testing.T) {
	env := map[string]string{EnvChoiceResponseHosts: " approvals.internal:8443, hooks.example "}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"approvals.internal:8443", "hooks.example"}; !slices.Equal(s.ChoiceResponseHosts, want) {
		t.Fatalf("from env: %q, want %q", s.ChoiceResponseHosts, want)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--choice-response-host", "a.example", "--choice-response-host", "b.example:9000"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.example", "b.example:9000"}; !slices.Equal(s.ChoiceResponseHosts, want) {
		t.Fatalf("after flags: %q, want %q", s.ChoiceResponseHosts, want)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--choice-response-host", "http://a.example/x"}); err == nil {
		t.Fatal("a URL was accepted as a host")
	}
}
