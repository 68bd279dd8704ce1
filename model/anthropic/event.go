package anthropic

import "github.com/gorap/gorap/internal/jsonwalk"

// Decoding stream events. A completion's stream is a
// dozen small events, and encoding/json's reflection over the event struct
// was a third of the provider's own CPU. ssestream decodes each event with
// json.Unmarshal, which checks that the data is valid JSON before it calls
// event.UnmarshalJSON; UnmarshalJSON then walks the object once
// (internal/jsonwalk) and keeps only the fields the accumulator reads,
// with the same results as encoding/json for every input (keys matched
// case-insensitively, a later duplicate key winning, null leaving a field
// alone, a value of the wrong type an error): TestEventDecodingAgreesWithEncodingJSON and
// FuzzEventDecoding compare the two.

// UnmarshalJSON decodes one stream event (see above).
func (e *event) UnmarshalJSON(data []byte) error {
	var r jsonwalk.Reader
	r.Reset(data, "anthropic stream event")
	if r.Null() {
		return r.End()
	}
	err := r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "type"):
			return r.StrOf(&e.Type, eventNames)
		case jsonwalk.KeyIs(key, "index"):
			return r.Int(&e.Index)
		case jsonwalk.KeyIs(key, "message"):
			return r.Object(func(key []byte) error {
				switch {
				case jsonwalk.KeyIs(key, "stop_reason"):
					return r.Str(&e.Message.StopReason)
				case jsonwalk.KeyIs(key, "usage"):
					return usage(&r, &e.Message.Usage)
				}
				return r.Skip()
			})
		case jsonwalk.KeyIs(key, "content_block"):
			cb := &e.ContentBlock
			return r.Object(func(key []byte) error {
				switch {
				case jsonwalk.KeyIs(key, "type"):
					return r.StrOf(&cb.Type, eventNames)
				case jsonwalk.KeyIs(key, "id"):
					return r.Str(&cb.ID)
				case jsonwalk.KeyIs(key, "name"):
					return r.Str(&cb.Name)
				case jsonwalk.KeyIs(key, "text"):
					return r.Str(&cb.Text)
				}
				return r.Skip()
			})
		case jsonwalk.KeyIs(key, "delta"):
			d := &e.Delta
			return r.Object(func(key []byte) error {
				switch {
				case jsonwalk.KeyIs(key, "type"):
					return r.StrOf(&d.Type, eventNames)
				case jsonwalk.KeyIs(key, "text"):
					return r.Str(&d.Text)
				case jsonwalk.KeyIs(key, "partial_json"):
					return r.Str(&d.PartialJSON)
				case jsonwalk.KeyIs(key, "stop_reason"):
					return r.StrOf(&d.StopReason, eventNames)
				case jsonwalk.KeyIs(key, "content"):
					return r.Str(&d.Content)
				case jsonwalk.KeyIs(key, "encrypted_content"):
					return r.Str(&d.EncryptedContent)
				case jsonwalk.KeyIs(key, "signature"):
					return r.Str(&d.Signature)
				}
				return r.Skip()
			})
		case jsonwalk.KeyIs(key, "usage"):
			return usage(&r, &e.Usage)
		}
		return r.Skip()
	})
	if err != nil {
		return err
	}
	return r.End()
}

// usage decodes an eventUsage object.
func usage(r *jsonwalk.Reader, u *eventUsage) error {
	return r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "input_tokens"):
			return r.Int(&u.InputTokens)
		case jsonwalk.KeyIs(key, "output_tokens"):
			return r.Int(&u.OutputTokens)
		case jsonwalk.KeyIs(key, "cache_read_input_tokens"):
			return r.Int(&u.CacheReadInputTokens)
		case jsonwalk.KeyIs(key, "cache_creation_input_tokens"):
			return r.Int(&u.CacheCreationInputTokens)
		}
		return r.Skip()
	})
}

// eventNames are the API's names for event, block, delta and stop kinds,
// which decoding an event does not copy.
var eventNames = []string{
	"content_block_delta", "input_json_delta", "text_delta", "content_block_start",
	"content_block_stop", "message_delta", "message_start", "message_stop",
	"text", "tool_use", "end_turn", "compaction", "compaction_delta", "signature_delta",
}
