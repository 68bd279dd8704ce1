package rap

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// Duplicate keys. encoding/json keeps the last of two
// members with the same name, other parsers keep the first or refuse the
// message, so a body with a duplicate key can mean one thing to a proxy or
// validator in front of a peer and another to the peer itself. Every rap
// decoder refuses such a body with an error naming the key, at any depth.

// dupKeySpan locates a member name in the scanned body: data[s:e], or,
// when s < 0, the unescaped name escapedKeys[-s-1].
type dupKeySpan struct{ s, e int }

// dupFrame is an object or array that duplicateKey has opened.
type dupFrame struct {
	object bool
	start  int        // index in keys of this object's first member name
	count  int        // members or elements before the current one
	name   dupKeySpan // the member name this value sits under, if named
	named  bool
	index  int                 // the element index this value sits at, in an array
	seen   map[string]struct{} // this object's names, once it has many
}

// dupLinearMax is how many member names of one object are compared one by
// one before duplicateKey switches to a map, so that an object with very
// many members costs linear time.
const dupLinearMax = 16

// duplicateKey reports the first member name that appears twice in one
// object of data, which must be valid JSON, as a *FieldError whose Field
// is the member's path, or nil.
func duplicateKey(data []byte) error {
	var (
		frameBuf  [8]dupFrame
		keyBuf    [32]dupKeySpan
		stack     = frameBuf[:0]
		keys      = keyBuf[:0]
		escaped   [][]byte
		expectKey bool
		lastKey   dupKeySpan
	)
	name := func(k dupKeySpan) []byte {
		if k.s < 0 {
			return escaped[-k.s-1]
		}
		return data[k.s:k.e]
	}
	for i := 0; i < len(data); {
		switch c := data[i]; c {
		case ' ', '\t', '\n', '\r', ':':
			i++
		case '{', '[':
			f := dupFrame{object: c == '{', start: len(keys)}
			if n := len(stack); n > 0 {
				if stack[n-1].object {
					f.name, f.named = lastKey, true
				} else {
					f.index = stack[n-1].count
				}
			}
			stack = append(stack, f)
			expectKey = f.object
			i++
		case '}', ']':
			if n := len(stack); n > 0 {
				keys = keys[:stack[n-1].start]
				stack = stack[:n-1]
			}
			expectKey = false
			i++
		case ',':
			if n := len(stack); n > 0 {
				stack[n-1].count++
				expectKey = stack[n-1].object
			}
			i++
		case '"':
			end := skipString(data, i)
			if end < 0 {
				return nil // not valid JSON: the caller's parser reports it
			}
			if expectKey && len(stack) > 0 {
				k := dupKeySpan{i + 1, end - 1}
				if bytes.IndexByte(data[k.s:k.e], '\\') >= 0 {
					var s string
					if json.Unmarshal(data[i:end], &s) != nil {
						return nil
					}
					escaped = append(escaped, []byte(s))
					k = dupKeySpan{-len(escaped), 0}
				}
				top := &stack[len(stack)-1]
				dup := false
				switch {
				case top.seen != nil:
					n := string(name(k))
					_, dup = top.seen[n]
					top.seen[n] = struct{}{}
				default:
					for _, other := range keys[top.start:] {
						if bytes.Equal(name(other), name(k)) {
							dup = true
							break
						}
					}
					keys = append(keys, k)
					if !dup && len(keys)-top.start > dupLinearMax {
						top.seen = make(map[string]struct{}, 2*dupLinearMax)
						for _, other := range keys[top.start:] {
							top.seen[string(name(other))] = struct{}{}
						}
						keys = keys[:top.start]
					}
				}
				if dup {
					return &FieldError{Field: dupPath(stack, name, k),
						Problem: "appears more than once in one JSON object; send each member once, since peers disagree on which copy counts"}
				}
				lastKey, expectKey = k, false
			}
			i = end
		default: // a number, true, false or null
			end := skipValue(data, i)
			if end <= i {
				return nil
			}
			i = end
		}
	}
	return nil
}

// dupPath is the path of member k of the innermost open object, such as
// "arguments.items[2].name".
func dupPath(stack []dupFrame, name func(dupKeySpan) []byte, k dupKeySpan) string {
	var b strings.Builder
	for _, f := range stack[1:] {
		if f.named {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(name(f.name))
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.Write(name(k))
	return b.String()
}

// DuplicateKey returns the path of the first member name that appears
// twice in one object of the JSON text data, such as "text" or
// "answers[1].choice", and "" when every name is unique or data is not
// valid JSON (decoding reports that). Servers that accept JSON from peers
// use it to refuse a body that two parsers could read differently.
func DuplicateKey(data []byte) string {
	if !json.Valid(data) {
		return ""
	}
	var fe *FieldError
	if err := duplicateKey(data); err != nil && errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}
