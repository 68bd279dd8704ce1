package openai

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// plainChunk is chunk without its UnmarshalJSON: what encoding/json makes
// of the same data, the reference chunk.decode is checked against.
type plainChunk chunk

// chunkCorpus holds chunks as servers send them, and the odd shapes a
// peer could send instead.
var chunkCorpus = append(append([]string(nil), chunkSamples...),
	// Order, spacing, case, escapes and repetition that encoding/json
	// accepts; a repeated list is decoded into the elements already there.
	` { "choices" : [ { "delta" : { "content" : "x" } , "index" : 0 } ] } `,
	`{"CHOICES":[{"Index":2,"Delta":{"Tool_Calls":[{"ID":"a","Function":{"NAME":"n","Arguments":"{}"}}]},"FINISH_REASON":"stop"}],"Usage":{"Prompt_Tokens":3}}`,
	`{"cho\u0069ces":[{"ind\u0065x":4,"delta":{"cont\u0065nt":"\u00e9\ud83d\ude00\ud800"}}]}`,
	`{"choices":[{"index":1,"delta":{"content":"a"}},{"index":2}],"choices":[{"finish_reason":"x"}]}`,
	`{"choices":[{"index":1},{"index":2},{"index":3}],"choices":[{"index":4}],"choices":[{},{}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"a"},{"index":2}]}}],"choices":[{"delta":{"tool_calls":[{"function":{"name":"f"}}]}}]}`,
	`{"choices":[{"index":1}],"choices":[],"choices":[{}]}`,
	`{"choices":[{"index":1}],"choices":null}`,
	`{"choices":[null,{"index":1},null]}`,
	`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2},"usage":null,"usage":{"prompt_tokens_details":{"cached_tokens":3}},"usage":{"prompt_tokens_details":{}}}`,
	`{"choices":[{"index":null,"delta":null,"finish_reason":null}],"usage":{"prompt_tokens":null,"prompt_tokens_details":null}}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":null,"id":null,"function":null},{"function":{"name":null,"arguments":null}}]}}]}`,
	`{"\u212aey":"kelvin","choices":[{"ındex":5,"delta":{"content":"dotless"}}]}`,
	`{"choices":[{"index":-0,"finish_reason":"inv`+"\xff"+`alid utf-8"}],"usage":{"prompt_tokens":-5,"completion_tokens":9223372036854775807}}`,
	`{"choices":[{"finish_reason":"stop"},{"finish_reason":"tool_calls"},{"finish_reason":"length"},{"finish_reason":"content_filter"},{"finish_reason":"stop\n"}]}`,
	`{"unknown":[1,2.5e3,-0.1,{"a":[true,false,null]},[],{}],"choices":[]}`,
	`null`,
	` null `,
	// Values of the wrong type: errors, as for encoding/json.
	`{"choices":{}}`,
	`{"choices":[1]}`,
	`{"choices":[[]]}`,
	`{"choices":[{"index":1.5}]}`,
	`{"choices":[{"index":1e2}]}`,
	`{"choices":[{"index":99999999999999999999}]}`,
	`{"choices":[{"delta":"x"}]}`,
	`{"choices":[{"delta":{"tool_calls":{}}}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":[]}]}}]}`,
	`{"choices":[{"finish_reason":false}]}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":"1"}}}`,
	`{"usage":[]}`,
	`[]`,
	`"chunk"`,
	`5`,
	`true`,
	// Not JSON at all: errors too.
	``,
	`{`,
	`{"choices":[`,
	`{"choices":[]}}`,
	`{"choices":[],}`,
	`{"choices":[{"index":0,}]}`,
	`{"choices":[{"delta":{"content":"\x"}}]}`,
	`{"choices":[{"delta":{"content":"\u12"}}]}`,
	`{"choices":[{"delta":{"content":"tab	in a string"}}]}`,
	`{"choices":[{"index":01}]}`,
	`{"choices":[{"index":-}]}`,
	`{"unknown":nul}`,
	`{"unknown":[1,]}`,
	`null x`,
	`{} {}`,
	strings.Repeat("[", 20000)+strings.Repeat("]", 20000),
	`{"a":`+strings.Repeat(`{"a":`, 10001)+`1`+strings.Repeat("}", 10002),
)

// prefilled is a chunk that already holds values, with room in its lists
// past their length holding old elements, as a chunk decoded into twice
// would: decoding into it must keep, merge and expose exactly what
// encoding/json does.
func prefilled() chunk {
	calls := []chunkToolCall{{Index: 7, ID: "old"}, {Index: 8}, {Index: 9, ID: "stale"}}
	calls[0].Function.Name = "oldname"
	choices := []chunkChoice{{Index: 5, FinishReason: "old"}, {Index: 6}, {Index: 7, Delta: chunkDelta{Content: "stale", ToolCalls: calls}}}
	choices[0].Delta.ToolCalls = calls[:1]
	var c chunk
	c.Choices = choices[:2]
	c.Usage.PromptTokens = 11
	c.Usage.PromptTokensDetails.CachedTokens = 12
	return c
}

// decodeBoth decodes data with chunk.decode and with encoding/json, into
// a zero chunk and into a prefilled one, and fails unless both fail or
// both give the same chunk.
func decodeBoth(t *testing.T, data []byte) {
	t.Helper()
	for _, start := range []func() chunk{func() chunk { return chunk{} }, prefilled} {
		got := start()
		gotErr := got.decode(data)
		want := plainChunk(start())
		wantErr := json.Unmarshal(data, &want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, encoding/json says %v", data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, chunk(want)) {
			t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
		}
		// A slice's elements past its length are decoded into by a later
		// repeated list: compare them too.
		if gotErr == nil && !reflect.DeepEqual(spare(got), spare(chunk(want))) {
			t.Fatalf("%q: elements past the lists' length differ:\n got %+v\nwant %+v", data, spare(got), spare(chunk(want)))
		}
	}
}

// spare is c's lists at their full capacity.
func spare(c chunk) chunk {
	c.Choices = c.Choices[:cap(c.Choices)]
	for i := range c.Choices {
		d := &c.Choices[i].Delta
		d.ToolCalls = d.ToolCalls[:cap(d.ToolCalls)]
	}
	return c
}

// TestChunkWalkAgreesWithEncodingJSON: chunk.decode reads what
// encoding/json reads from every chunk of the corpus and from random
// chunk-shaped documents, and fails where it fails.
func TestChunkWalkAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range chunkCorpus {
		decodeBoth(t, []byte(s))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 50000 {
		decodeBoth(t, randomChunk(r))
	}
	// Some that must decode to something, so the comparison is not
	// vacuous.
	var c chunk
	if err := c.decode([]byte(chunkSamples[6])); err != nil || len(c.Choices) != 1 || len(c.Choices[0].Delta.ToolCalls) != 1 ||
		c.Choices[0].Delta.ToolCalls[0].Function.Arguments != `{"text":"hi"}` || c.Choices[0].Delta.ToolCalls[0].ID != "call_a" {
		t.Fatalf("tool call chunk decoded as %+v, %v", c, err)
	}
	c = chunk{}
	if err := c.decode([]byte(chunkSamples[5])); err != nil || c.Usage.PromptTokensDetails.CachedTokens != 1024 || c.Usage.CompletionTokens != 31 {
		t.Fatalf("usage chunk decoded as %+v, %v", c, err)
	}
}

// FuzzChunkDecoding compares chunk.decode with encoding/json on any input.
func FuzzChunkDecoding(f *testing.F) {
	for _, s := range chunkCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { decodeBoth(t, data) })
}

// randomChunk writes a random document shaped mostly like a chunk: the
// members the decoder reads, under their names or other spellings, with
// values mostly of the right type, among unknown members, repeated
// members, nulls and, now and then, a byte changed.
func randomChunk(r *rand.Rand) []byte {
	var b strings.Builder
	var value func(kind string, depth int)
	ws := func() {
		if r.IntN(8) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n"}[r.IntN(4)])
		}
	}
	spell := func(name string) string {
		switch r.IntN(12) {
		case 0:
			return strings.ToUpper(name)
		case 1:
			return strings.ToUpper(name[:1]) + name[1:]
		case 2:
			return strings.Replace(name, "i", `\u0069`, 1)
		case 3:
			return strings.Replace(name, "k", "\u212a", 1)
		case 4:
			return name + "x"
		}
		return name
	}
	members := map[string][][2]string{
		"chunk":    {{"choices", "choices"}, {"usage", "usage"}, {"id", "string"}, {"object", "string"}},
		"choice":   {{"index", "int"}, {"delta", "delta"}, {"finish_reason", "string"}, {"logprobs", "any"}},
		"delta":    {{"content", "string"}, {"tool_calls", "calls"}, {"role", "string"}, {"refusal", "any"}},
		"call":     {{"index", "int"}, {"id", "string"}, {"function", "function"}, {"type", "string"}},
		"function": {{"name", "string"}, {"arguments", "string"}},
		"usage":    {{"prompt_tokens", "int"}, {"completion_tokens", "int"}, {"prompt_tokens_details", "details"}, {"total_tokens", "int"}},
		"details":  {{"cached_tokens", "int"}, {"audio_tokens", "int"}},
	}
	elems := map[string]string{"choices": "choice", "calls": "call"}
	kinds := []string{"chunk", "choice", "delta", "call", "function", "usage", "details", "choices", "calls", "int", "string", "any"}
	value = func(kind string, depth int) {
		ws()
		if depth > 9 || r.IntN(30) == 0 {
			kind = "any"
		} else if r.IntN(40) == 0 {
			kind = kinds[r.IntN(len(kinds))]
		}
		if r.IntN(16) == 0 {
			b.WriteString("null")
			ws()
			return
		}
		switch kind {
		case "int":
			b.WriteString([]string{"0", "1", "-3", "42", "1.5", "2e3", "-0", "99999999999999999999", `"7"`, "9223372036854775807"}[r.IntN(10)])
		case "string":
			s, _ := json.Marshal(randomString(r))
			if r.IntN(4) == 0 {
				s = []byte([]string{`"stop"`, `"tool_calls"`, `"a\u00e9\n"`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `"\/"`}[r.IntN(7)])
			}
			b.Write(s)
		case "choices", "calls":
			b.WriteByte('[')
			for i := range r.IntN(4) {
				if i > 0 {
					b.WriteByte(',')
				}
				value(elems[kind], depth+1)
			}
			b.WriteByte(']')
		case "any":
			switch r.IntN(5) {
			case 0:
				b.WriteString(`{"a":[1,{"b":null}],"c":"d"}`)
			case 1:
				b.WriteString("[true,false]")
			case 2:
				b.WriteString(`"x"`)
			case 3:
				b.WriteString("12")
			default:
				b.WriteString("{}")
			}
		default:
			b.WriteByte('{')
			ms := members[kind]
			for i := range r.IntN(5) {
				if i > 0 {
					b.WriteByte(',')
				}
				m := ms[r.IntN(len(ms))]
				ws()
				b.WriteString(`"` + spell(m[0]) + `"`) // spell writes JSON
				ws()
				b.WriteByte(':')
				value(m[1], depth+1)
			}
			b.WriteByte('}')
		}
		ws()
	}
	value("chunk", 0)
	out := []byte(b.String())
	if len(out) > 0 && r.IntN(10) == 0 {
		out[r.IntN(len(out))] = "{}[],:\"x0 \\"[r.IntN(11)]
	}
	return out
}
