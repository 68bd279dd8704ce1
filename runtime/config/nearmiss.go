package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gorap/gorap/internal/spelling"
)

// toolsetServerKeys are the members a toolset_server entry may have.
var toolsetServerKeys = []string{"type", "server_url", "id", "sha256", "pin", "budget"}

// nearMisses returns, for each member of the JSON object item that is not
// one of known but is spelled like one (the same letters without case,
// "_" or "-", or one or two typing slips away), a note naming both:
// `"serverurl" (did you mean "server_url"?)`. Other unknown members are
// left alone: the reference runtime ignores them, and so does gorap.
func nearMisses(item json.RawMessage, known []string) []string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(item, &obj) != nil {
		return nil
	}
	var notes []string
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if slices.Contains(known, k) {
			continue
		}
		for _, want := range known {
			if squash(k) == squash(want) || spelling.Distance(k, want) <= 2 {
				notes = append(notes, fmt.Sprintf("%q (did you mean %q?)", k, want))
				break
			}
		}
	}
	return notes
}

// squash is s in lower case without "_" and "-".
func squash(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}
