package wiretest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
)

// Prompt caching as the Anthropic Messages API does it:
// a cache_control marker on a tool, a system block or a message block is
// a breakpoint; the request's prefix up to and including that element
// (tools, then system, then messages, markers left out) is written to the
// cache, and a later request reads from the cache the longest prefix
// written before that ends at one of its breakpoints or at one of the
// lookBack elements before each. The server reports it in usage as
// cache_read_input_tokens and cache_creation_input_tokens, at four bytes
// of prefix per token.

// lookBack is how many elements before a breakpoint the API checks for an
// earlier cached prefix.
const lookBack = 20

// Breakpoint is one cache_control marker of a request.
type Breakpoint struct {
	// Where names the element, such as "tools[2]", "system[0]" or
	// "messages[4].content[1]".
	Where string
	// PrefixBytes is the size of the prefix it ends (markers left out).
	PrefixBytes int

	key [32]byte
	// earlier are the prefixes ending at the lookBack elements before it,
	// nearest first.
	earlier []prefixKey
}

// prefixKey identifies a request prefix: a hash chained over its elements.
type prefixKey struct {
	key   [32]byte
	bytes int
}

// antBreakpoints finds the breakpoints of an Anthropic request body.
func antBreakpoints(body []byte) []Breakpoint {
	var req struct {
		Tools    []map[string]any `json:"tools"`
		System   any              `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var (
		size  int
		chain [32]byte
		all   []prefixKey // the prefix ending at each element
		out   []Breakpoint
	)
	add := func(where string, el any) {
		m, _ := el.(map[string]any)
		_, marked := m["cache_control"]
		if marked {
			c := make(map[string]any, len(m))
			for k, v := range m {
				if k != "cache_control" {
					c[k] = v
				}
			}
			el = c
		}
		b, _ := json.Marshal(el)
		size += len(b)
		chain = sha256.Sum256(append(chain[:], b...))
		all = append(all, prefixKey{chain, size})
		if marked {
			bp := Breakpoint{Where: where, PrefixBytes: size, key: chain}
			for k := len(all) - 2; k >= 0 && k >= len(all)-1-lookBack; k-- {
				bp.earlier = append(bp.earlier, all[k])
			}
			out = append(out, bp)
		}
	}
	for i, t := range req.Tools {
		add(fmt.Sprintf("tools[%d]", i), t)
	}
	if blocks, ok := req.System.([]any); ok {
		for i, b := range blocks {
			add(fmt.Sprintf("system[%d]", i), b)
		}
	} else if req.System != nil {
		add("system", req.System)
	}
	for i, m := range req.Messages {
		chain = sha256.Sum256(append(chain[:], m.Role...))
		blocks, ok := m.Content.([]any)
		if !ok {
			add(fmt.Sprintf("messages[%d].content", i), m.Content)
			continue
		}
		for j, b := range blocks {
			add(fmt.Sprintf("messages[%d].content[%d]", i, j), b)
		}
	}
	return out
}

// cacheLookup reads and writes the server's prompt cache for the
// breakpoints of one request: it returns the bytes read from the cache
// (the longest prefix written before) and the bytes written (the rest, up
// to the last breakpoint). The caller holds a.mu.
func (a *API) cacheLookup(bps []Breakpoint) (read, written int) {
	if a.cache == nil {
		a.cache = map[[32]byte]bool{}
	}
	last := 0
	for _, bp := range bps {
		if a.cache[bp.key] {
			read = max(read, bp.PrefixBytes)
		}
		for _, e := range bp.earlier {
			if a.cache[e.key] {
				read = max(read, e.bytes)
				break
			}
		}
		last = max(last, bp.PrefixBytes)
	}
	for _, bp := range bps {
		a.cache[bp.key] = true
	}
	return read, max(last-read, 0)
}

// autoCache plays OpenAI's automatic prompt caching: the longest prefix
// body shares with one of the last requests is read from the cache. It
// returns its size in bytes. The caller holds a.mu.
func (a *API) autoCache(body []byte) int {
	best := 0
	for _, r := range a.recent {
		n := 0
		for n < len(r) && n < len(body) && r[n] == body[n] {
			n++
		}
		best = max(best, n)
	}
	if len(a.recent) >= 64 {
		a.recent = a.recent[1:]
	}
	a.recent = append(a.recent, body)
	return best
}
