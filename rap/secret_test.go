package rap

import "testing"

// Secrets are equal only when they are the same bytes; a prefix, an
// extension or a different length never passes.
func TestEqualSecret(t *testing.T) {
	for _, c := range []struct {
		got, want string
		ok        bool
	}{
		{"tok", "tok", true},
		{"", "", true},
		{"to", "tok", false},
		{"tokk", "tok", false},
		{"", "tok", false},
		{"TOK", "tok", false},
	} {
		if equalSecret(c.got, c.want) != c.ok {
			t.Errorf("equalSecret(%q, %q) = %v", c.got, c.want, !c.ok)
		}
	}
}
