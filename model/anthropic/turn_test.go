package anthropic

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
)

// awkwardStrings are strings whose JSON encoding differs between encoders:
// quotes, control characters, HTML characters, line separators, invalid
// UTF-8 and multi-byte characters cut short.
var awkwardStrings = []string{
	"", "plain", `"quoted"`, `back\slash`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
	"<b>&amp;</b>", "\u2028\u2029", "é ü 中文 🎉", "\xff", "a\xc3", "\xe2\x80", "\xe2\x80\xa8x", "\xed\xa0\x80",
}

func TestAppendJSONStringAgreesWithEncodingJSON(t *testing.T) {
	check := func(s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, encoding/json: %s", s, got, want)
		}
	}
	for _, s := range awkwardStrings {
		check(s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		check(string(b))
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range awkwardStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, encoding/json: %s", s, got, want)
		}
	})
}

func TestAppendCompactJSONAgreesWithMarshal(t *testing.T) {
	inputs := []string{
		`{}`, ` { } `, `{"a":1}`, "{\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } }",
		`{"s":"with spaces \" and \\ and <x> & y"}`, `{"s":"\u2028 raw:` + "\u2028\u2029" + `"}`,
		`{"k":"é","n":null,"t":true,"f":-1.5e3}`, `{"a":"\\","b":"\\\""}`,
	}
	for _, in := range inputs {
		want, err := json.Marshal(json.RawMessage(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := appendCompactJSON(nil, []byte(in)); !bytes.Equal(got, want) {
			t.Errorf("appendCompactJSON(%s) = %s, json.Marshal: %s", in, got, want)
		}
	}
}

// TestAppendTurnAgreesWithSDK encodes turns of every kind both ways: with
// appendTurn, and with the SDK's types (message, then json.Marshal's
// encoding), plain and as a cache breakpoint.
func TestAppendTurnAgreesWithSDK(t *testing.T) {
	img := model.ContentPart{Type: "image", MediaType: "image/png", Data: "iVBORw0KGgo="}
	turns := []model.Turn{
		{Role: model.RoleAssistant, Text: "hello <there>"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "get", Arguments: json.RawMessage(` { "q" : "a b" } `)}}},
		{Role: model.RoleAssistant, Text: "two calls", ToolCalls: []model.ToolCall{{ID: "c1", Name: "get"}, {ID: "c2", Name: "put", Arguments: json.RawMessage(`{"x":[1, 2]}`)}}},
		{Role: model.RoleUser, Content: []model.ContentPart{{Type: "text", Text: "hi\n\u2028"}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", Text: `{"ok":true}`}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", IsError: true, Text: "failed"}, {CallID: "c2"}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", Content: []model.ContentPart{{Type: "text", Text: "see"}, img, {Type: "image", MediaType: "image/tiff", Data: "x"}, {Type: "text"}}}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c3"}}, Content: []model.ContentPart{{Type: "text", Text: "and"}, img, {Type: "image", MediaType: "image/png"}}},
		{Role: model.RoleUser, Content: []model.ContentPart{img}},
		{Role: model.RoleUser, Content: []model.ContentPart{{Type: "text"}}}, // no block at all
	}
	for _, s := range awkwardStrings {
		turns = append(turns,
			model.Turn{Role: model.RoleAssistant, Text: s, ToolCalls: []model.ToolCall{{ID: s, Name: s, Arguments: json.RawMessage(`{"s":` + string(appendJSONString(nil, s)) + `}`)}}},
			model.Turn{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: s, Text: s}}, Content: []model.ContentPart{{Type: "text", Text: s}}})
	}
	for _, images := range []bool{true, false} {
		p := &Provider{images: images}
		for i, turn := range turns {
			m, err := p.message(turn)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, at, err := p.appendTurn([]byte("prefix"), turn)
			if err != nil {
				t.Fatal(err)
			}
			if got = got[len("prefix"):]; !bytes.Equal(got, want) {
				t.Errorf("images %v, turn %d: appendTurn\n%s\nSDK\n%s", images, i, got, want)
				continue
			}
			setCacheControl(m.Content)
			wantBP, _ := json.Marshal(m)
			gotBP := got
			if at >= 0 {
				gotBP = withBreakpoint(nil, got, at)
			}
			if !bytes.Equal(gotBP, wantBP) {
				t.Errorf("images %v, turn %d as breakpoint: appendTurn\n%s\nSDK\n%s", images, i, gotBP, wantBP)
			}
		}
	}
	p := &Provider{}
	bad := model.Turn{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c9", Name: "get", Arguments: json.RawMessage(`[1]`)}}}
	if got, _, err := p.appendTurn([]byte("kept"), bad); err == nil || string(got) != "kept" {
		t.Errorf("arguments that are not an object: appendTurn = %q, %v; want an error and the bytes before it untouched", got, err)
	}
}

// BenchmarkEncodeTurn encodes one tool-result turn (a JSON result of about
// 300 bytes) straight from the turn, as the wire cache does, and through
// the SDK's types and encoding/json, the reference it must match.
func BenchmarkEncodeTurn(b *testing.B) {
	result := `{"items":[` + strings.Repeat(`{"id":17,"name":"a \"quoted\" name","tags":["x","y"]},`, 5) + `{}]}`
	turn := model.Turn{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "toolu_01ABCDEFGHIJ", Text: result}}}
	p := &Provider{images: true}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _, _ = p.appendTurn(buf[:0], turn)
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, _ := p.message(turn)
			_, _ = json.Marshal(m)
		}
	})
}
