package model

// This file owns the estimate of a text's tokens: a cost per kind of
// character, cheap enough to run on every tool result and the same for
// every model (no tokenizer's vocabulary). docs/models.md gives its error
// against real tokenizers.

import (
	"unicode"
	"unicode/utf8"
)

// The estimate counts in quarter tokens ("units"), so that a text can be
// cut at a given cost without rounding. The costs, fitted to the OpenAI
// tokenizers (o200k_base, cl100k_base) and Anthropic's published one on
// English prose, Markdown, Go, JSON, logs, base64, French, Russian,
// Chinese, Japanese and Korean (docs/models.md has the figures):
const (
	unitsPerToken = 4
	letterUnits   = 1 // an ASCII letter: words take about four letters a token
	spaceUnits    = 1 // ASCII white space
	digitUnits    = 3 // an ASCII digit: numbers split into short pieces
	punctUnits    = 2 // other ASCII: punctuation and symbols
	cjkUnits      = 5 // a Han, kana or Hangul character: 1.25 tokens
	otherUnits    = 3 // any other character (accented letters, Cyrillic, emoji…)
	// switchUnits is added where a lower-case letter is followed by an
	// upper-case one, or a letter by a digit or a digit by a letter:
	// identifiers, hashes and base64 break into short tokens there.
	switchUnits = 3
)

// EstimateTokens returns an estimate of the tokens text takes in a model's
// context. It reads no vocabulary, so it is the same for every model.
// Measured against the OpenAI tokenizers and Anthropic's published one on
// English, Markdown, Go, JSON, logs, base64, French, Russian, Chinese,
// Japanese and Korean text (docs/models.md), the real count was from
// 0.66 to 1.25 times the estimate.
func EstimateTokens(text string) int {
	_, units := prefixWithin(text, -1)
	return (units + unitsPerToken - 1) / unitsPerToken
}

// class is the kind of an ASCII character that switchUnits looks at.
type class uint8

const (
	classOther class = iota
	classLower
	classUpper
	classDigit
)

// runeCost returns the cost of r in units, not counting a switch, and its
// class.
func runeCost(r rune) (int, class) {
	switch {
	case r >= 'a' && r <= 'z':
		return letterUnits, classLower
	case r >= 'A' && r <= 'Z':
		return letterUnits, classUpper
	case r >= '0' && r <= '9':
		return digitUnits, classDigit
	case r == ' ' || r == '\n' || r == '\t' || r == '\r':
		return spaceUnits, classOther
	case r < utf8.RuneSelf:
		return punctUnits, classOther
	case isCJK(r):
		return cjkUnits, classOther
	}
	return otherUnits, classOther
}

// switchCost is the cost of a character of class b right after one of
// class a.
func switchCost(a, b class) int {
	switch {
	case a == classLower && b == classUpper,
		(a == classLower || a == classUpper) && b == classDigit,
		a == classDigit && (b == classLower || b == classUpper):
		return switchUnits
	}
	return 0
}

// isCJK reports whether r is a CJK character: Han, Hiragana, Katakana,
// Hangul, or the CJK punctuation and full-width forms that go with them.
func isCJK(r rune) bool {
	switch {
	case r >= 0x3000 && r <= 0x303f, // CJK symbols and punctuation
		r >= 0xff00 && r <= 0xffef: // half-width and full-width forms
		return true
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// maxUnitsPerByte bounds the cost of one byte of any text: a digit after a
// letter costs digitUnits+switchUnits.
const maxUnitsPerByte = digitUnits + switchUnits

// prefixWithin returns the length of the longest prefix of text, ending
// at a character boundary, whose cost is at most budget units (a negative
// budget: the whole text), and that cost.
func prefixWithin(text string, budget int) (n, units int) {
	prev := classOther
	for n < len(text) {
		r, size := rune(text[n]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[n:])
		}
		c, cl := runeCost(r)
		c += switchCost(prev, cl)
		if budget >= 0 && units+c > budget {
			break
		}
		units += c
		n += size
		prev = cl
	}
	return n, units
}

// suffixWithin returns the start of the longest suffix of text, beginning
// at a character boundary, whose cost is at most budget units, and that
// cost.
func suffixWithin(text string, budget int) (start, units int) {
	start = len(text)
	next := classOther // the class of text[start]
	for start > 0 {
		r, size := rune(text[start-1]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeLastRuneInString(text[:start])
		}
		c, cl := runeCost(r)
		if start < len(text) {
			c += switchCost(cl, next)
		}
		if units+c > budget {
			break
		}
		units += c
		start -= size
		next = cl
	}
	return start, units
}
