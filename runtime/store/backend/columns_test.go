package backend

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// fullMessage has every stored field of tool calls and tool results set.
var fullMessage = store.Message{
	ToolCalls: []store.ToolCall{
		{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"go","n":[1,2]}`), Display: "search go"},
		{ID: "c2", Name: "fetch", Arguments: json.RawMessage(`{}`)},
	},
	ToolResults: []store.ToolResult{
		{CallID: "c1", Name: "search", Text: "found", DisplayAs: []rap.DisplaySegment{rap.TextSegment("found it"), rap.DiffSegment("a.go", "-x\n+y")}, Subscription: true},
		{CallID: "c2", Name: "fetch", Text: "Error: gone", IsError: true,
			Content: []rap.ContentItem{{Type: "text", Text: "gone"}, {Type: "image", Data: "aGk=", MediaType: "image/png"}}},
	},
}

// A message's tool calls and results written now carry format version 1
// in every record and read back identically.
func TestMessageColumnsReadBackIdentically(t *testing.T) {
	calls, results, err := EncodeMessage(fullMessage)
	if err != nil {
		t.Fatal(err)
	}
	for name, col := range map[string][]byte{ToolCallsColumn: calls, ToolResultsColumn: results} {
		var recs []map[string]json.RawMessage
		if err := json.Unmarshal(col, &recs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, r := range recs {
			if string(r["v"]) != "1" {
				t.Errorf(`%s record %d has "v" %s, want 1: %s`, name, i, r["v"], col)
			}
		}
	}
	var got store.Message
	if err := DecodeMessage(&got, calls, results); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, fullMessage) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, fullMessage)
	}
}

// A message without tool calls or results has NULL columns, which read
// back as none.
func TestEmptyMessageColumnsAreNull(t *testing.T) {
	calls, results, err := EncodeMessage(store.Message{ToolCalls: []store.ToolCall{}})
	if err != nil || calls != nil || results != nil {
		t.Fatalf("EncodeMessage of a message without calls or results = %q, %q, %v; want nil, nil", calls, results, err)
	}
	var m store.Message
	if err := DecodeMessage(&m, nil, nil); err != nil || m.ToolCalls != nil || m.ToolResults != nil {
		t.Errorf("DecodeMessage of NULL columns = %+v, %v; want no calls or results", m, err)
	}
}

// Records written before versions existed (no "v", the struct tags of
// earlier releases) read as version 1.
func TestUnversionedRecordsReadAsVersion1(t *testing.T) {
	calls := `[{"id":"c1","name":"search","arguments":{"q":"go"},"display":"search go"}]`
	results := `[{"call_id":"c1","name":"search","text":"found","content":[{"type":"text","text":"x"}],` +
		`"display_as":[{"type":"text","content":"found it"}],"is_error":true,"subscription":true}]`
	var m store.Message
	if err := DecodeMessage(&m, []byte(calls), []byte(results)); err != nil {
		t.Fatal(err)
	}
	want := store.Message{
		ToolCalls: []store.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"go"}`), Display: "search go"}},
		ToolResults: []store.ToolResult{{CallID: "c1", Name: "search", Text: "found", Content: []rap.ContentItem{{Type: "text", Text: "x"}},
			DisplayAs: []rap.DisplaySegment{{Type: "text", Content: json.RawMessage(`"found it"`)}}, IsError: true, Subscription: true}},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("read\n%+v\nwant\n%+v", m, want)
	}
	choices, err := DecodeChoices([]byte(`["yes","no"]`))
	if err != nil || !reflect.DeepEqual(choices, []string{"yes", "no"}) {
		t.Errorf("choices of an earlier release = %q, %v", choices, err)
	}
}

// A record of a format version this program does not know is refused
// with an error naming the column and the version, not read as zero
// values; so is one record of a later version among current ones.
func TestUnknownFormatVersionIsRefused(t *testing.T) {
	for _, c := range []struct {
		column, json string
		version      int
		decode       func([]byte) error
	}{
		{ToolCallsColumn, `[{"v":2,"id":"c1","name":"x","arguments":{}}]`, 2, func(b []byte) error { _, err := DecodeToolCalls(b); return err }},
		{ToolCallsColumn, `[{"v":1,"id":"c1","name":"x","arguments":{}},{"v":7,"call":"c2"}]`, 7, func(b []byte) error { _, err := DecodeToolCalls(b); return err }},
		{ToolResultsColumn, `[{"v":3,"call_id":"c1","outcome":{}}]`, 3, func(b []byte) error { _, err := DecodeToolResults(b); return err }},
		{ChoicesColumn, `{"v":2,"options":[{"label":"yes"}]}`, 2, func(b []byte) error { _, err := DecodeChoices(b); return err }},
		{ToolCallsColumn, `[{"v":-1,"id":"c1"}]`, -1, func(b []byte) error { _, err := DecodeToolCalls(b); return err }},
	} {
		err := c.decode([]byte(c.json))
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Column != c.column || fe.Version != c.version {
			t.Errorf("decode %s %s: error %v, want a *FormatError for %s version %d", c.column, c.json, err, c.column, c.version)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.column) || !strings.Contains(msg, "format version "+itoa(c.version)) {
			t.Errorf("error %q does not name the column %s and the version %d", msg, c.column, c.version)
		}
	}
}

// The choices of a user choice are written as the JSON array every
// release has written (version 1), and an object of version 1 reads too.
func TestChoicesColumn(t *testing.T) {
	b, err := EncodeChoices([]string{"a <b>", "ü"})
	if err != nil {
		t.Fatal(err)
	}
	var arr []string
	if err := json.Unmarshal(b, &arr); err != nil {
		t.Fatalf("choices column %s is not a JSON array: %v", b, err)
	}
	got, err := DecodeChoices(b)
	if err != nil || !reflect.DeepEqual(got, []string{"a <b>", "ü"}) {
		t.Errorf("choices read back as %q, %v", got, err)
	}
	if got, err := DecodeChoices([]byte(`{"v":1,"choices":["x"]}`)); err != nil || !reflect.DeepEqual(got, []string{"x"}) {
		t.Errorf("choices object of version 1 read as %q, %v", got, err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
