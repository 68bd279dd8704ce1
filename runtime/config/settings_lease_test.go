package config

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The lease settings: RAP_LEASE_TTL / --lease-ttl and
// RAP_SWEEP_EVERY / --sweep-every (the flag wins); the defaults are 15s
// and 1s; zero, negative and too short values are refused with an error
// naming the variable or flag and the floor; Check refuses a too short
// value set in code.
func TestLeaseSettings(t *testing.T) {
	d := Defaults(func(string) string { return "/h" })
	if d.LeaseTTL != DefaultLeaseTTL || d.SweepEvery != DefaultSweepEvery || DefaultLeaseTTL != 15*time.Second || DefaultSweepEvery != time.Second {
		t.Fatalf("defaults: lease %v, sweep %v; want 15s and 1s", d.LeaseTTL, d.SweepEvery)
	}
	env := map[string]string{EnvLeaseTTL: "3s", EnvSweepEvery: "250ms"}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.LeaseTTL != 3*time.Second || s.SweepEvery != 250*time.Millisecond {
		t.Fatalf("from env: lease %v, sweep %v; want 3s and 250ms", s.LeaseTTL, s.SweepEvery)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--lease-ttl", "1m", "--sweep-every", "2s"}); err != nil {
		t.Fatal(err)
	}
	if s.LeaseTTL != time.Minute || s.SweepEvery != 2*time.Second {
		t.Fatalf("after the flags: lease %v, sweep %v; want 1m and 2s (flags win)", s.LeaseTTL, s.SweepEvery)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("settings", "settings", s)
	if !strings.Contains(logs.String(), "settings.lease_ttl=1m0s") || !strings.Contains(logs.String(), "settings.sweep_every=2s") {
		t.Errorf("the start-up log should show the lease settings: %s", logs.String())
	}

	for _, tc := range []struct {
		env, flag, min string
		bad            []string
	}{
		{EnvLeaseTTL, "lease-ttl", "1s", []string{"0", "0s", "-5s", "999ms", "soon", ""}},
		{EnvSweepEvery, "sweep-every", "100ms", []string{"0", "-1s", "50ms", "often"}},
	} {
		for _, bad := range tc.bad {
			if bad != "" {
				_, err := FromEnv(func(k string) string {
					if k == tc.env {
						return bad
					}
					return ""
				})
				if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) || !strings.Contains(err.Error(), "at least "+tc.min) {
					t.Errorf("%s=%q: err = %v, want one naming the variable, the value and the floor %s", tc.env, bad, err, tc.min)
				}
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(new(bytes.Buffer))
			s := Defaults(func(string) string { return "/h" })
			s.RegisterFlags(fs)
			err := fs.Parse([]string{"--" + tc.flag, bad})
			if err == nil || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), "at least "+tc.min) {
				t.Errorf("--%s %q: err = %v, want one naming the flag and the floor %s", tc.flag, bad, err, tc.min)
			}
		}
	}

	for _, tc := range []struct {
		set  func(*Settings)
		flag string
	}{
		{func(s *Settings) { s.LeaseTTL = 500 * time.Millisecond }, "--lease-ttl"},
		{func(s *Settings) { s.LeaseTTL = -time.Second }, "--lease-ttl"},
		{func(s *Settings) { s.SweepEvery = time.Millisecond }, "--sweep-every"},
		{func(s *Settings) { s.SweepEvery = -time.Second }, "--sweep-every"},
	} {
		s := Defaults(func(string) string { return "/h" })
		tc.set(&s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("Check with lease %v, sweep %v: err = %v, want one naming %s", s.LeaseTTL, s.SweepEvery, err, tc.flag)
		}
	}
	// Zero set in code (a Settings literal) means the runtime's default.
	s = Defaults(func(string) string { return "/h" })
	s.LeaseTTL, s.SweepEvery = 0, 0
	if err := s.Check(); err != nil {
		t.Errorf("Check with zero lease settings (the defaults): %v", err)
	}
}
