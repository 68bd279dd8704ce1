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
	// gorap supports one, else gorap's: today, always gorap's.
	CompactionAuto = "auto"
	// CompactionGorap always uses gorap's own compaction.
	CompactionGorap = "gorap"
	// CompactionProvider would use only the provider's compaction; no
	// provider's is supported yet, so it is refused.
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

// ParseCompaction reads a compaction mode: auto (also ""), gorap or off.
// provider is refused with why: no provider's compaction is supported yet.
func ParseCompaction(s string) (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(s)); m {
	case "", CompactionAuto:
		return CompactionAuto, nil
	case CompactionGorap, CompactionOff:
		return m, nil
	case CompactionProvider:
		return "", fmt.Errorf("provider compaction (such as Anthropic's server-side compaction) is not supported by this gorap yet; use auto or gorap, which summarise with the thread's own model on every provider")
	}
	return "", fmt.Errorf("%q is not a compaction mode; want auto, gorap or off", s)
}
