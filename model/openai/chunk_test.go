package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	sdk "github.com/openai/openai-go/v3"
)

// chunkSamples are streamed chunks as OpenAI, Ollama, vLLM and
// llama-server send them, and some a lenient server might.
var chunkSamples = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel\u00e9lo \"x\"\n"},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_time","arguments":""}}]},"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":"}}]}}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":31,"total_tokens":1231,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"qwen2.5","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}}]},"finish_reason":null}]}`,
	`{"choices":[{"index":1,"delta":{"content":"second choice"}},{"index":0,"delta":{"content":"first"},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":null},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":0,"prompt_tokens_details":null}}`,
	`{}`,
	// Values of a type the API does not define, which the SDK's decoder
	// tolerates: the chunk still decodes, as it did through the SDK.
	`{"choices":[{"index":"0","delta":{"content":"x"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":["a","b"]},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":7,"function":{"name":"f","arguments":{"a":1}}}]}}],"usage":"none"}`,
}

// TestChunkDecodingAgreesWithSDK: a chunk decoded by our small type holds
// what the SDK's ChatCompletionChunk holds of the fields the accumulator
// reads, for well-formed chunks (encoding/json) and for chunks with values
// of unexpected types (the fallback on the SDK's type).
func TestChunkDecodingAgreesWithSDK(t *testing.T) {
	for _, s := range chunkSamples {
		var full sdk.ChatCompletionChunk
		if err := json.Unmarshal([]byte(s), &full); err != nil {
			t.Fatalf("the SDK refuses %s: %v", s, err)
		}
		want := chunkFromSDK(full)
		var got chunk
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if !reflect.DeepEqual(emptyAsNil(got), emptyAsNil(want)) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", s, got, want)
		}
	}
	// Not JSON at all is still an error.
	var c chunk
	if err := json.Unmarshal([]byte(`{"choices":[`), &c); err == nil {
		t.Error("a truncated chunk decoded without an error")
	}
}

// emptyAsNil makes empty lists nil: the accumulator does not tell them
// apart.
func emptyAsNil(c chunk) chunk {
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	for i := range c.Choices {
		if len(c.Choices[i].Delta.ToolCalls) == 0 {
			c.Choices[i].Delta.ToolCalls = nil
		}
	}
	return c
}

// BenchmarkChunkDecoding decodes one tool-call fragment: as
// ssestream.Stream does (chunk: json.Unmarshal, which validates the data,
// then calls chunk.UnmarshalJSON), as Complete does (walk: chunk.decode
// alone, see chunkStream), with encoding/json's reflection
// (encoding-json: what UnmarshalJSON did before decode), and with the
// SDK's type.
func BenchmarkChunkDecoding(b *testing.B) {
	data := []byte(chunkSamples[3])
	b.Run("chunk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c chunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c chunk
			if err := c.decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c plainChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c sdk.ChatCompletionChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
