package anthropic

import (
	"encoding/json"
	"strings"
	"testing"
)

// plainEvent is event without its UnmarshalJSON: what encoding/json makes
// of the same data, the reference event decoding is checked against.
type plainEvent event

// eventCorpus holds stream events as the API sends them, and the odd
// shapes a peer could send instead.
var eventCorpus = []string{
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":3,"cache_read_input_tokens":1200,"output_tokens":1,"service_tier":"standard"}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, \"world\" \u00e9\n"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"hm"}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`,
	`{"type":"message_stop"}`,
	`{"type":"ping"}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":null,"encrypted_content":null}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"compaction_delta","content":"Summary: \u00e9","encrypted_content":"ZW5j"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"compaction_delta","content":null}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}`,
	// Order, spacing, case and repetition that encoding/json accepts.
	` { "index" : 3 , "type" : "content_block_delta" , "delta" : { "text" : "x" , "type" : "text_delta" } } `,
	`{"TYPE":"message_stop","Index":7}`,
	`{"type":"a","type":"b","delta":{"text":"1"},"delta":{"type":"text_delta"}}`,
	`{"type":null,"index":null,"message":null,"delta":null,"usage":null}`,
	`{"typ\u0065":"escaped key","ind\u0065x":4}`,
	`{"type":"\ud83d\ude00 surrogate pair","unknown":[1,2.5e3,-0.1,{"a":[true,false,null]},[],{}]}`,
	`{"type":"inv` + "\xff" + `alid utf-8"}`,
	`{"\u212aey":"kelvin","type":"x"}`,
	`{"type":"x","index":-0}`,
	`{}`,
	`null`,
	// Values of the wrong type: errors, as for encoding/json.
	`{"type":5}`,
	`{"index":"5"}`,
	`{"index":1.5}`,
	`{"index":1e2}`,
	`{"index":99999999999999999999}`,
	`{"message":"x"}`,
	`{"delta":[]}`,
	`{"usage":{"output_tokens":true}}`,
	`[]`,
	`"event"`,
	`5`,
	// Not JSON at all: errors too.
	``,
	`{`,
	`{"type":"x"`,
	`{"type":"x"}}`,
	`{"type":"x",}`,
	`{"type":"\x"}`,
	`{"type":"\u12"}`,
	`{"type":"tab	in a string"}`,
	`{"index":01}`,
	`{"index":-}`,
	`{"unknown":nul}`,
	`{"unknown":[1,]}`,
	`{"unknown":tru}`,
	`null x`,
	`{"type":"x"} {}`,
	strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
	`{"a":` + strings.Repeat(`{"a":`, 10001) + `1` + strings.Repeat("}", 10002),
}

func decodeBoth(t *testing.T, data []byte) {
	t.Helper()
	var got event
	gotErr := got.UnmarshalJSON(data)
	var want plainEvent
	wantErr := json.Unmarshal(data, &want)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, encoding/json says %v", data, gotErr, wantErr)
	}
	if gotErr == nil && got != event(want) {
		t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
	}
}

// TestEventDecodingAgreesWithEncodingJSON: the stream event decoder reads
// what encoding/json reads from every event of the corpus, and fails where
// it fails.
func TestEventDecodingAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range eventCorpus {
		decodeBoth(t, []byte(s))
	}
	// A few that must decode to something, so the comparison is not
	// vacuous.
	var ev event
	if err := json.Unmarshal([]byte(eventCorpus[0]), &ev); err != nil || ev.Message.Usage.CacheReadInputTokens != 1200 || ev.Type != "message_start" {
		t.Fatalf("message_start decoded as %+v, %v", ev, err)
	}
	ev = event{}
	if err := json.Unmarshal([]byte(eventCorpus[4]), &ev); err != nil || ev.Delta.PartialJSON != `{"city": "Par` || ev.Index != 1 {
		t.Fatalf("input_json_delta decoded as %+v, %v", ev, err)
	}
}

// FuzzEventDecoding compares the stream event decoder with encoding/json
// on any input.
func FuzzEventDecoding(f *testing.F) {
	for _, s := range eventCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { decodeBoth(t, data) })
}

// BenchmarkEventDecoding compares decoding one input_json_delta event
// with the event decoder and with encoding/json.
func BenchmarkEventDecoding(b *testing.B) {
	data := []byte(eventCorpus[4])
	b.Run("event", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ev event
			if err := ev.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ev plainEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
