package termchat

import "testing"

// A count is written with its noun in the singular for one and the
// plural otherwise, never "(s)".
func TestPluralCounts(t *testing.T) {
	for n, want := range map[int]string{0: "0 tool calls", 1: "1 tool call", 2: "2 tool calls"} {
		if got := plural(n, "tool call"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
