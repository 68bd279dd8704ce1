package config

import (
	"strings"
	"testing"
)

// --compaction takes auto (the default), gorap, provider and off (whether
// the model has a compaction of its own is the runtime's to check, once
// the model is known); anything else is refused with the modes that exist.
func TestParseCompaction(t *testing.T) {
	for in, want := range map[string]string{"": CompactionAuto, "auto": CompactionAuto, "GORAP": CompactionGorap, " off ": CompactionOff, "Provider": CompactionProvider} {
		if got, err := ParseCompaction(in); err != nil || got != want {
			t.Errorf("ParseCompaction(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseCompaction("sometimes"); err == nil || !strings.Contains(err.Error(), "auto, gorap, provider or off") {
		t.Errorf("an unknown mode: %v; want the modes listed", err)
	}
}
