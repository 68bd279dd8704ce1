package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The MCP specification says a tool that returns structuredContent
// SHOULD also return it serialised in a text block. Servers do so in
// several ways: the same JSON (server-everything), the JSON of a part of
// it (server-memory: text [..], structuredContent {"entities": [..]}), or
// the data itself as plain text (server-filesystem's read_text_file: the
// file as text, structuredContent {"content": <the file>}). The bridge
// passes the structured content on only when the text blocks do not
// already carry its data, so that a result never holds the same data
// twice (a large file would otherwise double, and can then pass the
// callback size limit).

// maxLeafSearch bounds the work of looking for structured leaves in the
// text by substring search (leaves times text bytes); past it the
// structured content is treated as not covered and passed on.
const maxLeafSearch = 256 << 20

// structuredCovered reports whether the text blocks texts already carry
// the data of the structured content raw (its JSON): one text is the
// same JSON value, or the JSON value of its only member, or every
// non-empty string and every number in it occurs in the texts (verbatim,
// or JSON-escaped as in a JSON text). A structured content without any
// string is covered only by the first two rules, so that numbers alone
// are never taken as found by chance.
func structuredCovered(texts []string, raw []byte) bool {
	if len(texts) == 0 {
		return false
	}
	sc, ok := decodeNumbers(raw)
	if !ok {
		return false
	}
	want := canonical(sc)
	var only []byte // canonical JSON of the only member's value
	if m, ok := sc.(map[string]any); ok && len(m) == 1 {
		for _, v := range m {
			only = canonical(v)
		}
	}
	var strs, nums []string
	collectLeaves(sc, &strs, &nums)

	// Leaves of the texts that are JSON, for an exact lookup.
	found := map[string]bool{}
	for _, t := range texts {
		found[t] = true
		v, ok := decodeNumbers([]byte(t))
		if !ok {
			continue
		}
		c := canonical(v)
		if bytes.Equal(c, want) || only != nil && bytes.Equal(c, only) {
			return true
		}
		var ts, tn []string
		collectLeaves(v, &ts, &tn)
		for _, s := range ts {
			found[s] = true
		}
		for _, n := range tn {
			found["#"+n] = true
		}
	}
	if len(strs) == 0 {
		return false
	}
	joined := strings.Join(texts, "\n")
	budget := maxLeafSearch
	search := func(s string) bool {
		if budget -= len(joined); budget < 0 {
			return false
		}
		return strings.Contains(joined, s)
	}
	for _, s := range strs {
		if found[s] || search(s) {
			continue
		}
		if esc := jsonEscaped(s); esc != s && search(esc) {
			continue
		}
		return false
	}
	for _, n := range nums {
		if !found["#"+n] && !search(n) {
			return false
		}
	}
	return true
}

// decodeNumbers decodes one JSON value, keeping numbers as written.
func decodeNumbers(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// canonical is v's JSON with sorted object keys; equal values have equal
// canonical forms (numbers compare as written).
func canonical(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// collectLeaves appends v's non-empty strings to strs and its numbers
// to nums; object keys are structure, not data, and are left out.
func collectLeaves(v any, strs, nums *[]string) {
	switch x := v.(type) {
	case string:
		if x != "" {
			*strs = append(*strs, x)
		}
	case json.Number:
		*nums = append(*nums, x.String())
	case []any:
		for _, e := range x {
			collectLeaves(e, strs, nums)
		}
	case map[string]any:
		for _, e := range x {
			collectLeaves(e, strs, nums)
		}
	}
}

// jsonEscaped is s as it appears inside a JSON string literal written
// by a JSON serialiser (JavaScript's JSON.stringify escapes no HTML).
func jsonEscaped(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return string(b[1 : len(b)-1])
}
