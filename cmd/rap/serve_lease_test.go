package main

import (
	"testing"
	"time"

	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/config"
)

// --lease-ttl and --sweep-every (RAP_LEASE_TTL, RAP_SWEEP_EVERY)
// reach the settings, flags over the environment; their defaults are the
// runtime's.
func TestServeLeaseSettings(t *testing.T) {
	if config.DefaultLeaseTTL != runtime.DefaultLeaseTTL || config.DefaultSweepEvery != runtime.DefaultSweepEvery {
		t.Fatalf("config defaults (lease %v, sweep %v) differ from the runtime's (%v, %v)",
			config.DefaultLeaseTTL, config.DefaultSweepEvery, runtime.DefaultLeaseTTL, runtime.DefaultSweepEvery)
	}
	clearRAPEnv(t)
	s, err := serveSettingsFor()
	if err != nil {
		t.Fatal(err)
	}
	if s.LeaseTTL != runtime.DefaultLeaseTTL || s.SweepEvery != runtime.DefaultSweepEvery {
		t.Errorf("defaults: lease %v, sweep %v", s.LeaseTTL, s.SweepEvery)
	}
	t.Setenv(config.EnvLeaseTTL, "3s")
	t.Setenv(config.EnvSweepEvery, "250ms")
	if s, err = serveSettingsFor(); err != nil || s.LeaseTTL != 3*time.Second || s.SweepEvery != 250*time.Millisecond {
		t.Errorf("from the environment: lease %v, sweep %v, err %v; want 3s, 250ms", s.LeaseTTL, s.SweepEvery, err)
	}
	if s, err = serveSettingsFor("--lease-ttl", "1m", "--sweep-every", "2s"); err != nil || s.LeaseTTL != time.Minute || s.SweepEvery != 2*time.Second {
		t.Errorf("flags over the environment: lease %v, sweep %v, err %v; want 1m, 2s", s.LeaseTTL, s.SweepEvery, err)
	}
}
