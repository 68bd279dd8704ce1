package config

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// --metrics-listen (RAP_METRICS_LISTEN, the flag wins) is off by default;
// Check refuses an address that is not HOST:PORT, or the listen address
// itself, naming the flag.
func TestMetricsListenSetting(t *testing.T) {
	if d := Defaults(func(string) string { return "/h" }); d.MetricsListen != "" {
		t.Fatalf("default metrics listen = %q, want none", d.MetricsListen)
	}
	s, err := FromEnv(func(k string) string { return map[string]string{EnvMetricsListen: "10.0.0.5:9464"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.MetricsListen != "10.0.0.5:9464" {
		t.Fatalf("from env: %q", s.MetricsListen)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--metrics-listen", "127.0.0.1:9464"}); err != nil {
		t.Fatal(err)
	}
	if s.MetricsListen != "127.0.0.1:9464" {
		t.Fatalf("after the flag: %q (the flag wins)", s.MetricsListen)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"9464", "metrics.internal", s.Listen} {
		s.MetricsListen = bad
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), "metrics-listen") {
			t.Errorf("Check with metrics listen %q = %v, want an error naming --metrics-listen", bad, err)
		}
	}
	if usage := fs.Lookup("metrics-listen").Usage; !strings.Contains(usage, "WITHOUT the client token") {
		t.Errorf("the flag's help does not warn that it serves without a token: %s", usage)
	}
}
