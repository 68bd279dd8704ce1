package openai

import (
	"bytes"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/gorap/gorap/internal/jsonwalk"
)

// Decoding streamed chunks. A completion streams a
// chunk every few tokens, and each went through encoding/json twice over
// (ssestream.Stream's json.Unmarshal validates the data and finds the
// value's end before it calls chunk.UnmarshalJSON, which then ran
// encoding/json's reflection over the chunk struct). Now Complete reads
// the events with the SDK's ssestream.Decoder and decodes each chunk
// itself (chunkStream), as the Anthropic provider does with its events:
// decode walks the object once (internal/jsonwalk), checking on the way
// that it is valid JSON, and fills the fields the accumulator reads with
// what encoding/json would put there, for every input: keys matched
// case-insensitively, a later duplicate key winning (a repeated array
// decoded into the elements already there, as encoding/json does), null
// leaving a field alone and making a list nil, a value of the wrong type
// an error. TestChunkWalkAgreesWithEncodingJSON and FuzzChunkDecoding
// compare the two.

// UnmarshalJSON decodes a chunk, falling back on the SDK's type for a
// chunk decode refuses (a value of an unexpected type from a lenient
// server), which the SDK's decoder accepts as it did before decode
// existed. ssestream.Stream calls it for the events chunkStream hands on.
func (c *chunk) UnmarshalJSON(data []byte) error {
	if err := c.decode(data); err == nil {
		return nil
	}
	var full sdk.ChatCompletionChunk
	if err := full.UnmarshalJSON(data); err != nil {
		return err
	}
	*c = chunkFromSDK(full)
	return nil
}

// decode reads data into c as encoding/json would (see above).
func (c *chunk) decode(data []byte) error {
	_, err := c.decodeEvent(data)
	return err
}

// decodeEvent is decode that also reports whether the object has a member
// named "error" in any case, which ssestream.Stream would take for an
// error event (chunkStream).
func (c *chunk) decodeEvent(data []byte) (errorKey bool, err error) {
	var r jsonwalk.Reader
	r.Reset(data, "openai stream chunk")
	if r.Null() {
		return false, r.End()
	}
	err = r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "choices"):
			return array(&r, &c.Choices, func(ch *chunkChoice) error { return ch.decode(&r) })
		case jsonwalk.KeyIs(key, "usage"):
			return c.Usage.decode(&r)
		case jsonwalk.KeyIs(key, "error"):
			errorKey = true
		}
		return r.Skip()
	})
	if err != nil {
		return errorKey, err
	}
	return errorKey, r.End()
}

// decode reads one element of a chunk's choices.
func (ch *chunkChoice) decode(r *jsonwalk.Reader) error {
	return r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "index"):
			return r.Int(&ch.Index)
		case jsonwalk.KeyIs(key, "finish_reason"):
			return r.StrOf(&ch.FinishReason, finishReasons)
		case jsonwalk.KeyIs(key, "delta"):
			d := &ch.Delta
			return r.Object(func(key []byte) error {
				switch {
				case jsonwalk.KeyIs(key, "content"):
					return r.Str(&d.Content)
				case jsonwalk.KeyIs(key, "tool_calls"):
					return array(r, &d.ToolCalls, func(tc *chunkToolCall) error { return tc.decode(r) })
				}
				return r.Skip()
			})
		}
		return r.Skip()
	})
}

// decode reads one tool-call fragment of a delta.
func (tc *chunkToolCall) decode(r *jsonwalk.Reader) error {
	return r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "index"):
			return r.Int(&tc.Index)
		case jsonwalk.KeyIs(key, "id"):
			return r.Str(&tc.ID)
		case jsonwalk.KeyIs(key, "function"):
			fn := &tc.Function
			return r.Object(func(key []byte) error {
				switch {
				case jsonwalk.KeyIs(key, "name"):
					return r.Str(&fn.Name)
				case jsonwalk.KeyIs(key, "arguments"):
					return r.Str(&fn.Arguments)
				}
				return r.Skip()
			})
		}
		return r.Skip()
	})
}

// decode reads a chunk's usage.
func (u *chunkUsage) decode(r *jsonwalk.Reader) error {
	return r.Object(func(key []byte) error {
		switch {
		case jsonwalk.KeyIs(key, "prompt_tokens"):
			return r.Int(&u.PromptTokens)
		case jsonwalk.KeyIs(key, "completion_tokens"):
			return r.Int(&u.CompletionTokens)
		case jsonwalk.KeyIs(key, "prompt_tokens_details"):
			d := &u.PromptTokensDetails
			return r.Object(func(key []byte) error {
				if jsonwalk.KeyIs(key, "cached_tokens") {
					return r.Int(&d.CachedTokens)
				}
				return r.Skip()
			})
		}
		return r.Skip()
	})
}

// array reads a JSON array into *s with elem, as encoding/json decodes
// into a slice: null makes *s nil and [] an empty slice; otherwise the
// elements are decoded into those *s already holds, as far as its
// capacity reaches (so that a repeated key merges into what the first one
// gave), then into new zero ones, and *s is cut to the array's length.
func array[T any](r *jsonwalk.Reader, s *[]T, elem func(*T) error) error {
	if r.Null() {
		*s = nil
		return nil
	}
	v, i := *s, 0
	err := r.Array(func() error {
		switch {
		case i < len(v): // into the element already there
		case i < cap(v):
			v = v[:i+1]
		default:
			var zero T
			v = append(v, zero)
		}
		i++
		return elem(&v[i-1])
	})
	if err != nil {
		return err
	}
	if i == 0 {
		v = []T{}
	}
	*s = v[:i]
	return nil
}

// finishReasons are the finish reasons the API sends, which decoding a
// chunk does not copy.
var finishReasons = []string{"stop", "tool_calls", "length", "content_filter", "function_call"}

// chunkStream reads the chunks of a Chat Completions event stream, with
// the results ssestream.Stream[chunk] gives, in fewer passes over each
// chunk (see above). A plain chunk, valid and without an "error" member,
// is decoded here; any other event ([DONE] aside) is handed to an
// ssestream.Stream of its own, one event long, so that error events, the
// "thread." events the SDK rewrites, and chunks decode refuses (decoded by
// the SDK's type, or failing with encoding/json's error) come out exactly
// as they did through the SDK: TestChunkStreamAgreesWithSSEStream
// compares the two.
type chunkStream struct {
	events ssestream.Decoder // nil reads as an empty stream
	err    error
	done   bool
}

// next reads the next chunk into c; it returns false at the end of the
// stream or on an error, which err then holds.
func (s *chunkStream) next(c *chunk) bool {
	if s.done || s.events == nil {
		return false
	}
	if !s.events.Next() {
		s.done, s.err = true, s.events.Err()
		return false
	}
	ev := s.events.Event()
	if bytes.HasPrefix(ev.Data, []byte("[DONE]")) {
		s.done = true
		return false
	}
	*c = chunk{}
	// ssestream.Stream takes an event whose object has a member named
	// exactly "error" (gjson) for an error; decodeEvent flags the name in
	// any case, a wider net, and those events go the Stream's way.
	if !strings.HasPrefix(ev.Type, "thread.") {
		if errorKey, err := c.decodeEvent(ev.Data); err == nil && !errorKey {
			return true
		}
		*c = chunk{}
	}
	one := ssestream.NewStream[chunk](&oneEvent{ev: ev}, nil)
	if one.Next() {
		*c = one.Current()
		return true
	}
	s.done, s.err = true, one.Err()
	return false
}

// oneEvent is an ssestream.Decoder that yields one event.
type oneEvent struct {
	ev   ssestream.Event
	read bool
}

func (d *oneEvent) Next() bool {
	if d.read {
		return false
	}
	d.read = true
	return true
}

func (d *oneEvent) Event() ssestream.Event { return d.ev }
func (d *oneEvent) Close() error           { return nil }
func (d *oneEvent) Err() error             { return nil }
