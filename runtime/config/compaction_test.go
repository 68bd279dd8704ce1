package config

import (
	"strings"
	"testing"
)

// --compaction takes auto (the default), gorap and off; provider is
// refused with why, and anything else with the modes that exist.
func TestParseCompaction(t *testing.T) {
	for in, want := range map[string]string{"": CompactionAuto, "auto": CompactionAuto, "GORAP": CompactionGorap, " off ": CompactionOff} {
		if got, err := ParseCompaction(in); err != nil || got != want {
			t.Errorf("ParseCompaction(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseCompaction("provider"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("provider: %v; want a refusal saying it is not supported", err)
	}
	if _, err := ParseCompaction("sometimes"); err == nil || !strings.Contains(err.Error(), "auto, gorap or off") {
		t.Errorf("an unknown mode: %v; want the modes listed", err)
	}
}
