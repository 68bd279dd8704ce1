package config

import (
	"strings"
	"testing"
)

const goodDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestPinsOfToolsetServerEntries(t *testing.T) {
	data := `{"tool_sets": [
		{"type": "toolset_server", "server_url": "http://a.example/", "sha256": "` + strings.ToUpper(goodDigest) + `"},
		{"type": "toolset_server", "server_url": "http://b.example", "pin": "first_use"},
		{"type": "toolset_server", "server_url": "http://c.example"},
		{"type": "toolset_server", "server_url": "http://a.example", "sha256": "` + strings.Repeat("0", 64) + `"}
	]}`
	f, err := Parse([]byte(data), "p.json")
	if err != nil {
		t.Fatal(err)
	}
	pins := f.ToolsetPins()
	if len(pins) != 2 {
		t.Fatalf("ToolsetPins = %+v; want a and b", pins)
	}
	// The digest is kept lowercase; the first entry of a URL wins, as its
	// URL does in ServerURLs.
	if a := pins["http://a.example"]; a.SHA256 != goodDigest || a.FirstUse || a.Source != "p.json: tool_sets[0]" {
		t.Errorf("pin of a = %+v; want the first entry's lowercase digest from p.json: tool_sets[0]", a)
	}
	if b := pins["http://b.example"]; !b.FirstUse || b.SHA256 != "" || b.Source != "p.json: tool_sets[1]" {
		t.Errorf("pin of b = %+v; want first use from p.json: tool_sets[1]", b)
	}
}

// A malformed pin is a config error naming the file, the entry and the
// field, and saying what a good one looks like.
func TestPinErrorsNameEntryAndField(t *testing.T) {
	for _, c := range []struct {
		name, entry string
		want        []string
	}{
		{"short", `"sha256": "abc123"`, []string{`p.json: tool_sets[1].sha256: "abc123" is not a SHA-256 digest`, "64 lowercase hex digits", "rap validate http://x.example"}},
		{"not hex", `"sha256": "` + strings.Repeat("g", 64) + `"`, []string{`tool_sets[1].sha256:`, "not a SHA-256 digest"}},
		{"65 digits", `"sha256": "` + goodDigest + `0"`, []string{`tool_sets[1].sha256:`, "not a SHA-256 digest"}},
		{"number", `"sha256": 12`, []string{`tool_sets[1].sha256: is a JSON number; want a string`}},
		{"unknown mode", `"pin": "tofu"`, []string{`tool_sets[1].pin: "tofu" is not a pin mode`, `"first_use"`}},
		{"both", `"pin": "first_use", "sha256": "` + goodDigest + `"`, []string{`tool_sets[1].pin:`, "cannot be combined"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := `{"tool_sets": [{"type": "toolset_server", "server_url": "http://ok.example"},
				{"type": "toolset_server", "server_url": "http://x.example", ` + c.entry + `}]}`
			_, err := Parse([]byte(data), "p.json")
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// "sha256" and "pin" verify toolset_server discovery documents only; on
// another entry type they are refused rather than silently ignored.
func TestPinRefusedOnOtherEntryTypes(t *testing.T) {
	data := `{"tool_sets": [{"type": "tools_json", "bundle": "b", "sha256": "` + goodDigest + `"}]}`
	_, err := Parse([]byte(data), "p.json")
	if err == nil || !strings.Contains(err.Error(), `tool_sets[0].sha256: only "toolset_server" entries are pinned`) {
		t.Fatalf("Parse = %v; want the sha256 of a tools_json entry refused", err)
	}
}
