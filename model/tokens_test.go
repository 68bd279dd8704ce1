package model

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The estimate's costs: four ASCII letters or spaces a token, digits and
// punctuation dearer, a switch between letters and digits or into upper
// case dearer still, 1.25 tokens a CJK character and 0.75 any other
// non-ASCII one, rounded up.
func TestEstimateTokens(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"the quick brown fox jumps over", 8}, // 30 letters and spaces
		{"2026", 3},                           // 4 digits: 12 units
		{"{}", 1},                             // 2 punctuation: 4 units
		{"aB", 2},                             // 2 letters and a switch: 5 units
		{"a1b", 3},                            // 1+3+3 and two switches: 11 units
		{"日本語", 4},                            // 3 CJK characters: 15 units
		{"한국어", 4},                            // Hangul
		{"。", 2},                              // CJK punctuation: 5 units
		{"été", 2},                            // 2 accented letters and a t: 7 units
		{"Привет", 5},                         // 6 Cyrillic letters: 18 units
	} {
		if got := EstimateTokens(c.text); got != c.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", c.text, got, c.want)
		}
	}
	// A text's estimate is the sum of its characters' costs (each part
	// rounded up): a long text is as dear as its parts.
	line := "func (r *Runtime) buildRequest(threadID string) model.Request {\n"
	if got, one := EstimateTokens(strings.Repeat(line, 1000)), EstimateTokens(line); got <= 1000*(one-1) || got > 1000*one {
		t.Errorf("1000 lines: %d tokens, one line %d", got, one)
	}
}

// prefixWithin and suffixWithin cut at a character boundary, within the
// budget, and as late (early) as the budget allows: one more character
// would exceed it. The whole text costs at least the prefix and the
// suffix that do not overlap.
func TestPrefixAndSuffixWithin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "Z", "7", " ", "\n", "{", "é", "日", "ア", "한", "Я", "😀", "\xff"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		_, total := prefixWithin(s, -1)
		budget := rng.IntN(total + 5)
		n, u := prefixWithin(s, budget)
		if u > budget || !boundary(s, n) {
			t.Fatalf("prefixWithin(%q, %d) = %d, %d units", s, budget, n, u)
		}
		if n < len(s) {
			if _, more := prefixWithin(s[:n+runeLen(s[n:])], -1); more <= budget {
				t.Fatalf("prefixWithin(%q, %d) = %d: one more character fits (%d units)", s, budget, n, more)
			}
		}
		start, su := suffixWithin(s, budget)
		if su > budget || !boundary(s, start) {
			t.Fatalf("suffixWithin(%q, %d) = %d, %d units", s, budget, start, su)
		}
		if _, whole := prefixWithin(s[start:], -1); whole != su {
			t.Fatalf("suffixWithin(%q, %d): counted %d units for a suffix that costs %d", s, budget, su, whole)
		}
		if start > 0 {
			_, size := utf8.DecodeLastRuneInString(s[:start])
			if _, more := prefixWithin(s[start-size:], -1); more <= budget {
				t.Fatalf("suffixWithin(%q, %d) = %d: one more character fits (%d units)", s, budget, start, more)
			}
		}
		if n <= start {
			if u+su > total {
				t.Fatalf("%q: prefix %d + suffix %d units > whole %d", s, u, su, total)
			}
		}
	}
}

func boundary(s string, i int) bool { return i == 0 || i == len(s) || utf8.RuneStart(s[i]) }

func runeLen(s string) int {
	_, size := utf8.DecodeRuneInString(s)
	return size
}
