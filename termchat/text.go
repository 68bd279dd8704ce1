package termchat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// argsText renders a call's arguments for people: compact JSON whose
// string members that hold JSON themselves are shown as that JSON, not
// escaped inside a string.
func argsText(args json.RawMessage, maxLen int) string {
	dec := json.NewDecoder(strings.NewReader(string(args)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return oneLine(string(args), maxLen)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; dec.More(); i++ {
		key, err := dec.Token()
		var val json.RawMessage
		if err != nil || dec.Decode(&val) != nil {
			return oneLine(string(args), maxLen)
		}
		var str string
		if json.Unmarshal(val, &str) == nil {
			if t := strings.TrimSpace(str); (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
				val = json.RawMessage(t)
			}
		}
		var compact bytes.Buffer
		if json.Compact(&compact, val) != nil {
			return oneLine(string(args), maxLen)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(compact.Bytes())
	}
	b.WriteByte('}')
	return oneLine(b.String(), maxLen)
}

// threadIDPattern matches the runtime's thread ids (UUIDs).
var threadIDPattern = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-([0-9a-f]{12})\b`)

// shortIDs shortens the thread ids in a line of tool text to the short ids
// the transcript labels threads with.
func shortIDs(s string) string {
	return threadIDPattern.ReplaceAllStringFunc(s, shortID)
}

// clean makes text from tools, models and servers safe to print on a
// terminal: control characters other than newline and tab (escape
// sequences among them) become U+FFFD; carriage returns are dropped.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return -1
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return utf8.RuneError
		}
		return r
	}, s)
}

// shorten keeps at most maxLines lines and maxChars bytes of s.
func shorten(s string, maxLines, maxChars int) string {
	s = strings.TrimRight(s, "\n")
	cut := false
	if lines := strings.Split(s, "\n"); len(lines) > maxLines {
		s = strings.Join(lines[:maxLines], "\n")
		cut = true
	}
	if len(s) > maxChars {
		s = truncUTF8(s, maxChars)
		cut = true
	}
	if cut {
		s += " … (shortened)"
	}
	return s
}

// shortID shortens a thread id for display.
// Its last 8 characters are kept: the runtime's ids are time-ordered, so
// threads started close together share their first ones.
func shortID(id string) string {
	id = clean(id)
	if n := utf8.RuneCountInString(id); n > 8 {
		r := []rune(id)
		return string(r[n-8:])
	}
	return id
}

// plural formats a count with a noun: "1 tool call", "2 tool calls".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// oneLine collapses whitespace runs and shortens s to max bytes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return truncUTF8(s, max) + "…"
	}
	return s
}

// truncUTF8 cuts s to at most n bytes without splitting a character.
func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
