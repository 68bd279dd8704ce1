package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

// encodeTurnSDK is how turns were encoded before appendTurn, and the
// reference it is held to: the turn's messages built with the SDK's types
// (messages) and marshalled by the SDK, each followed by a comma.
func (p *Provider) encodeTurnSDK(t model.Turn) ([]byte, error) {
	msgs, err := p.messages(t)
	if err != nil {
		return nil, err
	}
	var b []byte
	for _, m := range msgs {
		enc, err := m.MarshalJSON() // not json.Marshal, which would escape HTML characters the SDK leaves as they are
		if err != nil {
			return nil, err
		}
		b = append(append(b, enc...), ',')
	}
	return b, nil
}

// awkwardStrings are strings whose JSON encoding differs between encoders:
// quotes, control characters, HTML characters (which the SDK does not
// escape), line separators, invalid UTF-8, multi-byte characters cut short,
// and what strings.TrimSpace trims.
var awkwardStrings = []string{
	"", "plain", `"quoted"`, `back\slash`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
	"<b>&amp;</b>", "\u2028\u2029", "é ü 中文 🎉", "\xff", "a\xc3", "\xe2\x80", "\xe2\x80\xa8x", "\xed\xa0\x80",
	"\u00a0\u2003\v\u0085", "/slash/", "\\u0041", "\ufffd", "call_\xe2", "\xa8tail",
}

// oddArguments are tool call arguments: empty, white space of every kind
// strings.TrimSpace trims, spaces to keep (the API gets the arguments as a
// string, not compacted), escapes, and JSON that is not valid.
var oddArguments = []string{
	"", " ", "\t\n\r ", "\u00a0\u2003\v", `{}`, ` { "q" : "<x> & y" , "n": [1, 2] } `, "\v{}\u0085",
	`{"s":"\u2028 raw:` + "\u2028\u2029" + `"}`, `[1,2]`, `"str"`, `null`, `{"k":"é","t":true,"f":-1.5e3}`,
	`{"a":"\\","b":"\\\""}`, `{"c":"\u0000"}`,
	// Not valid JSON: an error, from both paths.
	`{`, `{"a":1}}`, "{\"a\":\"\xff\"}x", `{'a':1}`, "\u00a0{\u00a0}",
}

func TestAppendJSONStringAgreesWithSDK(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, err := param.NewOpt(s).MarshalJSON() // the SDK's encoder for one string
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, SDK: %s", s, got, want)
		}
		if got := appendJSONString(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString([]byte(%q)) = %s, SDK: %s", s, got, want)
		}
	}
	for _, s := range append(awkwardStrings, oddArguments...) {
		check(s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		check(randomString(r))
	}
}

// randomString draws an awkward string, random bytes, or a mix.
func randomString(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return awkwardStrings[r.IntN(len(awkwardStrings))]
	case 1:
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	case 2:
		return fmt.Sprintf("text %d", r.IntN(1000))
	default:
		return awkwardStrings[r.IntN(len(awkwardStrings))] + randomString(r)
	}
}

// edgeTurns are turns of every shape messages handles.
func edgeTurns() []model.Turn {
	img := model.ContentPart{Type: "image", MediaType: "image/png", Data: "iVBORw0KGgo="}
	turns := []model.Turn{
		{Role: model.RoleAssistant}, // nothing at all: {"role":"assistant"}
		{Role: model.RoleAssistant, Text: "hello <there> & \"you\""},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "get", Arguments: json.RawMessage(` { "q" : "a b" } `)}}},
		{Role: model.RoleAssistant, Text: "two calls", ToolCalls: []model.ToolCall{{ID: "c1", Name: "get"}, {ID: "", Name: "put", Arguments: json.RawMessage(`{"x":[1, 2]}`)}}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c2", Name: "bad name/é", Arguments: json.RawMessage("\n")}, {ID: "c3", Name: strings.Repeat("long", 20)}, {ID: "c4"}}},
		{Role: model.RoleUser}, // no message at all
		{Role: model.RoleUser, Content: []model.ContentPart{{Type: "text"}}},
		{Role: model.RoleUser, Content: []model.ContentPart{{Type: "text", Text: "hi\n\u2028"}, {Type: "text", Text: "two"}, {Type: "other", Text: "typed"}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", Text: `{"ok":true}`}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", IsError: true, Text: "failed"}, {CallID: "c2"}, {CallID: "c3", IsError: true}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", Content: []model.ContentPart{{Type: "text", Text: "see"}, img, {Type: "image", MediaType: "image/tiff", Data: "x"}, {Type: "text"}, {Type: "image", MediaType: "text/plain", Data: "eA=="}}}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", Content: []model.ContentPart{img}}, {CallID: "c2", IsError: true, Content: []model.ContentPart{img, img}}}, Content: []model.ContentPart{{Type: "text", Text: "after"}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c3"}}, Content: []model.ContentPart{{Type: "text", Text: "and"}, img, {Type: "image", MediaType: "image/png"}}},
		{Role: model.RoleUser, Content: []model.ContentPart{img}},
		{Role: model.RoleUser, Content: []model.ContentPart{{Type: "image"}, {Type: "text", Text: "x"}}},
		{Role: model.RoleUser, Content: []model.ContentPart{{Type: "image", MediaType: "image/<png>\"\xff", Data: "a\u2028b"}}},
	}
	for _, s := range awkwardStrings {
		turns = append(turns,
			model.Turn{Role: model.RoleAssistant, Text: s, ToolCalls: []model.ToolCall{{ID: s, Name: s, Arguments: json.RawMessage(`{"s":` + string(appendJSONString(nil, s)) + `}`)}}},
			model.Turn{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: s, Text: s}, {CallID: s, Content: []model.ContentPart{{Type: "text", Text: s}, img}}},
				Content: []model.ContentPart{{Type: "text", Text: s}, {Type: "image", MediaType: s, Data: s}}},
			model.Turn{Role: model.RoleUser, Content: []model.ContentPart{{Type: "text", Text: s}, {Type: "text", Text: s}}})
	}
	for _, a := range oddArguments {
		turns = append(turns, model.Turn{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "ok", Name: "f", Arguments: json.RawMessage(`{}`)}, {ID: "c", Name: "f", Arguments: json.RawMessage(a)}}})
	}
	return turns
}

// randomTurn draws a turn of any shape, with awkward strings anywhere.
func randomTurn(r *rand.Rand) model.Turn {
	part := func() model.ContentPart {
		switch r.IntN(6) {
		case 0:
			return model.ContentPart{Type: "image", MediaType: "image/png", Data: "iVBORw0KGgo="}
		case 1:
			return model.ContentPart{Type: "image", MediaType: randomString(r), Data: randomString(r)}
		case 2:
			return model.ContentPart{Type: []string{"text", "image", "", "x"}[r.IntN(4)], Text: randomString(r)}
		default:
			return model.ContentPart{Type: "text", Text: randomString(r)}
		}
	}
	parts := func() []model.ContentPart {
		var ps []model.ContentPart
		for range r.IntN(4) {
			ps = append(ps, part())
		}
		return ps
	}
	if r.IntN(2) == 0 {
		t := model.Turn{Role: model.RoleAssistant}
		if r.IntN(3) > 0 {
			t.Text = randomString(r)
		}
		for range r.IntN(4) {
			args := oddArguments[r.IntN(len(oddArguments)-5)] // valid ones, mostly
			if r.IntN(20) == 0 {
				args = oddArguments[r.IntN(len(oddArguments))]
			}
			t.ToolCalls = append(t.ToolCalls, model.ToolCall{ID: randomString(r), Name: randomString(r), Arguments: json.RawMessage(args)})
		}
		return t
	}
	t := model.Turn{Role: model.RoleUser, Content: parts()}
	for range r.IntN(4) {
		res := model.ToolResult{CallID: randomString(r), IsError: r.IntN(3) == 0}
		if r.IntN(2) == 0 {
			res.Text = randomString(r)
		} else {
			res.Content = parts()
		}
		t.ToolResults = append(t.ToolResults, res)
	}
	return t
}

// checkTurn encodes t with appendTurn and with the SDK and fails unless
// the bytes, or the errors, are the same.
func checkTurn(t *testing.T, p *Provider, turn model.Turn) {
	t.Helper()
	want, wantErr := p.encodeTurnSDK(turn)
	got, gotErr := p.appendTurn([]byte("prefix"), turn)
	if wantErr != nil || gotErr != nil {
		if wantErr == nil || gotErr == nil || gotErr.Error() != wantErr.Error() {
			t.Fatalf("images %v, turn %#v: appendTurn error %v, SDK error %v", p.images, turn, gotErr, wantErr)
		}
		if string(got) != "prefix" {
			t.Fatalf("images %v, turn %#v: appendTurn failed but changed the bytes before it: %q", p.images, turn, got)
		}
		return
	}
	if got = got[len("prefix"):]; !bytes.Equal(got, want) {
		t.Fatalf("images %v, turn %#v:\nappendTurn %s\nSDK        %s", p.images, turn, got, want)
	}
}

// TestAppendTurnAgreesWithSDK encodes turns of every kind both ways:
// hand-picked edge cases, the turns of random conversations (plain and
// with awkward characters), and random turns.
func TestAppendTurnAgreesWithSDK(t *testing.T) {
	providers := []*Provider{{images: true}, {images: false}}
	for _, p := range providers {
		for _, turn := range edgeTurns() {
			checkTurn(t, p, turn)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for seed := range 200 {
		msgs := wiretest.RandomConversation(r)
		if seed%2 == 1 {
			msgs = wiretest.Awkward(msgs)
		}
		turns, err := model.Normalize(msgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, turn := range turns {
			checkTurn(t, providers[seed%3/2], turn)
		}
	}
	for i := range 5000 {
		checkTurn(t, providers[i%2], randomTurn(r))
	}
}

// TestAppendTurnError: a call with arguments that are not JSON fails the
// whole request with an error that names the turn, the call and the tool.
func TestAppendTurnError(t *testing.T) {
	p := &Provider{}
	turns := []model.Turn{
		{Role: model.RoleUser, Content: []model.ContentPart{{Type: "text", Text: "hi"}}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "get", Arguments: json.RawMessage(`{}`)}, {ID: "c9", Name: "put", Arguments: json.RawMessage(`{"a":`)}}},
	}
	_, err := p.encodeBody(nil, 10, "", nil, turns, 0, 0, nil, nil, 0)
	want := "openai: conversation turn 1 (assistant): tool call 1 (id c9, tool put): arguments are not valid JSON"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestAppendSystemAgreesWithSDK: the system message is written as the SDK
// writes sdk.SystemMessage.
func TestAppendSystemAgreesWithSDK(t *testing.T) {
	for _, s := range append(awkwardStrings, "Be brief.", "You are thread 7 <of 9> & \"more\".") {
		m := sdk.SystemMessage(s)
		want, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSystem(nil, s); !bytes.Equal(got, append(want, ',')) {
			t.Errorf("system %q: got %s, SDK %s", s, got, want)
		}
	}
}

// FuzzAppendTurn compares appendTurn with the SDK's encoding on turns
// made of any strings: shape picks the role and which fields are set.
func FuzzAppendTurn(f *testing.F) {
	f.Add(uint16(0), "hello", "c1", "get", []byte(`{"a":1}`), "image/png")
	f.Add(uint16(1), "<b>&\u2028", "\xff", "bad name", []byte(" \u00a0"), "iVBORw0KGgo=")
	f.Add(uint16(0xffff), "", "", "", []byte(nil), "")
	f.Add(uint16(0x5a5a), "\x00\"\\", "call\xe2\x80", "n", []byte("{\"s\":\"\u2029\"}"), "image/jpeg")
	f.Fuzz(func(t *testing.T, shape uint16, text, id, name string, args []byte, media string) {
		bit := func(i int) bool { return shape&(1<<i) != 0 }
		var turn model.Turn
		if bit(0) {
			turn = model.Turn{Role: model.RoleAssistant}
			if bit(1) {
				turn.Text = text
			}
			for i := range int(shape>>2) % 3 {
				turn.ToolCalls = append(turn.ToolCalls, model.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args[:len(args)*i/2])})
			}
		} else {
			turn = model.Turn{Role: model.RoleUser}
			img := model.ContentPart{Type: "image", MediaType: media, Data: text}
			if bit(1) {
				img.MediaType = "image/png"
			}
			if bit(2) {
				turn.ToolResults = append(turn.ToolResults, model.ToolResult{CallID: id, Text: text, IsError: bit(3)})
			}
			if bit(4) {
				turn.ToolResults = append(turn.ToolResults, model.ToolResult{CallID: name, IsError: bit(5),
					Content: []model.ContentPart{{Type: "text", Text: name}, img, {Type: "text", Text: string(args)}}})
			}
			if bit(6) {
				turn.Content = append(turn.Content, model.ContentPart{Type: "text", Text: text})
			}
			if bit(7) {
				turn.Content = append(turn.Content, img)
			}
			if bit(8) {
				turn.Content = append(turn.Content, model.ContentPart{Type: media, Text: string(args)})
			}
		}
		checkTurn(t, &Provider{images: bit(9)}, turn)
	})
}

// BenchmarkEncodeTurn encodes one tool-result turn (a JSON result of about
// 300 bytes) straight from the turn, as the wire cache does, and through
// the SDK's types and encoder, the reference it must match.
func BenchmarkEncodeTurn(b *testing.B) {
	result := `{"items":[` + strings.Repeat(`{"id":17,"name":"a \"quoted\" name","tags":["x","y"]},`, 5) + `{}]}`
	turn := model.Turn{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "call_01ABCDEFGHIJ", Text: result}}}
	p := &Provider{images: true}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = p.appendTurn(buf[:0], turn)
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = p.encodeTurnSDK(turn)
		}
	})
}
