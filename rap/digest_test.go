package rap_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// RFC 8785 section 3.2.2: the sample input and its canonical form, which
// covers whitespace, number serialization and string escaping.
const (
	rfc8785Input = `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	rfc8785Canonical = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
)

func TestCanonicalJSONMatchesRFC8785Sample(t *testing.T) {
	got, err := rap.CanonicalJSON([]byte(rfc8785Input))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != rfc8785Canonical {
		t.Errorf("canonical form:\n got %s\nwant %s", got, rfc8785Canonical)
	}
	// The digest is the SHA-256 of exactly those bytes, so any RFC 8785
	// implementation computes the same one.
	sum := sha256.Sum256([]byte(rfc8785Canonical))
	d, err := rap.ToolsetDigest([]byte(rfc8785Input))
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]); d != want {
		t.Errorf("ToolsetDigest = %s, want %s", d, want)
	}
}

// RFC 8785 section 3.2.3: members are sorted by their names' UTF-16 code
// units, so the emoji (a surrogate pair, 0xD83D...) sorts before U+FB33
// although its code point is larger.
func TestCanonicalJSONSortsKeysByUTF16CodeUnits(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	got, err := rap.CanonicalJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","דּ":"Hebrew Letter Dalet With Dagesh"}`
	if string(got) != want {
		t.Errorf("canonical form:\n got %q\nwant %q", got, want)
	}
}

// RFC 8785 appendix B: numbers are written as ECMAScript writes doubles.
func TestCanonicalJSONNumbersMatchRFC8785AppendixB(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"5e-324", "5e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"9007199254740992", "9007199254740992"},
		{"-9007199254740992", "-9007199254740992"},
		{"295147905179352830000", "295147905179352830000"},
		{"1e23", "1e+23"},
		{"999999999999999700000", "999999999999999700000"},
		{"1e21", "1e+21"},
		{"0.000001", "0.000001"},
		{"1e-7", "1e-7"},
		{"4.50", "4.5"},
	} {
		got, err := rap.CanonicalJSON([]byte("[" + c.in + "]"))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if string(got) != "["+c.want+"]" {
			t.Errorf("%s: canonical %s, want [%s]", c.in, got, c.want)
		}
	}
}

func TestToolsetDigestIgnoresMemberOrderAndWhitespace(t *testing.T) {
	a := `{"name":"weather","endpoint":"https://w.example/invoke","tools":[{"name":"now","description":"the time","inputSchema":{"type":"object","additionalProperties":false}}]}`
	b := "{\n  \"tools\" : [ {\"inputSchema\": {\"additionalProperties\": false, \"type\": \"object\"},\n \"description\": \"the time\", \"name\": \"now\"} ],\n\t\"endpoint\": \"https:\\/\\/w.example/invoke\", \"name\": \"weath\\u0065r\"\n}\n"
	da, err := rap.ToolsetDigest([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	db, err := rap.ToolsetDigest([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("digests differ for one document written two ways: %s and %s", da, db)
	}
	if len(da) != 64 || strings.ToLower(da) != da {
		t.Errorf("digest %q is not 64 lowercase hex digits", da)
	}
	dc, _ := rap.ToolsetDigest([]byte(strings.Replace(a, "the time", "the date", 1)))
	if dc == da {
		t.Error("a changed description kept the digest")
	}
}

func TestToolsetDigestRefusesDocumentsWithoutCanonicalForm(t *testing.T) {
	for _, doc := range []string{`{"a":1,"a":2}`, `{"a":1e400}`, `{"a":`, `not json`} {
		if d, err := rap.ToolsetDigest([]byte(doc)); err == nil {
			t.Errorf("ToolsetDigest(%s) = %s, want an error", doc, d)
		} else if !strings.Contains(err.Error(), "RFC 8785") {
			t.Errorf("ToolsetDigest(%s) error %q does not say what is wrong", doc, err)
		}
	}
}

func TestIsToolsetDigestAcceptsOnlyWhatToolsetDigestReturns(t *testing.T) {
	d, err := rap.ToolsetDigest([]byte(`{"tools":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !rap.IsToolsetDigest(d) {
		t.Errorf("IsToolsetDigest(%q) = false for a digest ToolsetDigest returned", d)
	}
	for _, bad := range []string{"", d[:63], d + "0", strings.ToUpper(d), "g" + d[1:], "sha256:" + d[7:]} {
		if rap.IsToolsetDigest(bad) {
			t.Errorf("IsToolsetDigest(%q) = true", bad)
		}
	}
}
