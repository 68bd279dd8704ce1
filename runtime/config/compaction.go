package config

// This file owns the compaction setting: whether the runtime summarises a
// thread's older history when a request nears the model's context window
// (rap serve --compaction, RAP_COMPACTION).

import (
	"fmt"
	"strings"
)

// EnvCompaction is the environment variable of --compaction.
const EnvCompaction = "RAP_COMPACTION"

// Compaction modes.
const (
	// CompactionAuto compacts with the provider's own compaction where
	// the model has one (Anthropic's server-side compaction, for
	// claude-opus-4-6 and claude-sonnet-4-6), else with gorap's.
	CompactionAuto = "auto"
	// CompactionGorap always uses gorap's own compaction.
	CompactionGorap = "gorap"
	// CompactionProvider uses only the provider's own compaction; the
	// runtime refuses to start with a model that has none.
	CompactionProvider = "provider"
	// CompactionOff never compacts: every request carries the whole
	// history.
	CompactionOff = "off"
)

// compactionValue is the --compaction flag: one of the modes.
type compactionValue struct{ dst *string }

func (v compactionValue) String() string {
	if v.dst == nil {
		return ""
	}
	return *v.dst
}

func (v compactionValue) Set(s string) error {
	m, err := ParseCompaction(s)
	if err != nil {
		return err
	}
	*v.dst = m
	return nil
}

// Type names the flag's kind in help and errors (pflag.Value).
func (v compactionValue) Type() string { return "mode" }

// ParseCompaction reads a compaction mode: auto (also ""), gorap,
// provider or off. Whether the model has a compaction of its own for
// provider is known only once the model is: the runtime checks it at
// start (runtime.CompactionProvider).
func ParseCompaction(s string) (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(s)); m {
	case "", CompactionAuto:
		return CompactionAuto, nil
	case CompactionGorap, CompactionProvider, CompactionOff:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a compaction mode; want auto, gorap, provider or off", s)
}
