package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The structured content is left out exactly when the text blocks
// already carry its data.
func TestStructuredCovered(t *testing.T) {
	file := "line one\nline \"two\" <b>&</b>\n\ttabbed\n"
	cases := []struct {
		name  string
		texts []string
		sc    string
		want  bool
	}{
		{"same JSON", []string{`{"b":2,"a":"x"}`}, `{"a":"x","b":2}`, true},
		{"same JSON pretty-printed", []string{"{\n  \"a\": \"x\",\n  \"b\": 2\n}"}, `{"a":"x","b":2}`, true},
		{"the file as text and as the only member", []string{file}, `{"content":` + jsonString(file) + `}`, true},
		{"the JSON of the only member", []string{`[{"name":"a","observations":["o \"q\""]}]`}, `{"entities":[{"name":"a","observations":["o \"q\""]}]}`, true},
		{"an empty list as the only member", []string{`[]`}, `{"entities":[]}`, true},
		{"every string, JSON-escaped in a pretty JSON text", []string{"{\n  \"entities\": [\n    {\"name\": \"Ann <x>\", \"note\": \"a\\nb\"}\n  ]\n}"}, `{"entities":[{"name":"Ann <x>","note":"a\nb"}],"relations":[]}`, true},
		{"the message as text, a flag beside it", []string{"Entities deleted successfully"}, `{"success":true,"message":"Entities deleted successfully"}`, true},
		{"strings found, a number missing", []string{"done"}, `{"status":"done","count":31337}`, false},
		{"strings and numbers found", []string{"done: 31337 items"}, `{"status":"done","count":31337}`, true},
		{"a string missing", []string{"The weather in Paris"}, `{"city":"Paris","sky":"cloudy"}`, false},
		{"numbers only, not the same JSON", []string{"It is 21.5 degrees"}, `{"temperature":21.5}`, false},
		{"no text", nil, `{"a":"x"}`, false},
		{"different JSON", []string{`{"a":"y"}`}, `{"a":"x"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := structuredCovered(c.texts, []byte(c.sc)); got != c.want {
				t.Errorf("structuredCovered(%q, %s) = %v, want %v", c.texts, c.sc, got, c.want)
			}
		})
	}
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string { return `"` + jsonEscaped(s) + `"` }

// A text file sent as text and again as structuredContent reaches the
// model once, whole.
func TestMapResultCarriesTheDataOnce(t *testing.T) {
	file := strings.Repeat("a line of the file with \"quotes\" and <tags>\n", 5000)
	res := &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: file}},
		StructuredContent: map[string]any{"content": file},
	}
	rep := mapResult("files", "read_text_file", res)
	if rep.Text != file {
		t.Errorf("result is %d bytes, want the file's %d bytes once", len(rep.Text), len(file))
	}
	res = &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: "It is warm."}},
		StructuredContent: map[string]any{"temperature": 21.5},
	}
	if rep := mapResult("w", "weather", res); rep.Text != "It is warm.\n{\"temperature\":21.5}" {
		t.Errorf("structured data the text lacks: result %q, want it appended", rep.Text)
	}
}
