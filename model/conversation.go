package model

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
)

// Turn is one message of a conversation after Normalize, in the shape the
// model APIs demand: turns alternate between the roles, every tool call of
// an assistant turn is answered in the user turn right after it, and no
// tool result answers anything but a call of the turn before it.
//
// An assistant turn carries Text and ToolCalls. A user turn carries
// ToolResults, exactly one per call of the preceding assistant turn and in
// the order of those calls, then Content: the results that arrived too late
// to answer their call (each headed by a text part naming the call), then
// the user's text.
type Turn struct {
	Role        Role
	Text        string        // assistant turns only
	ToolCalls   []ToolCall    // assistant turns only
	ToolResults []ToolResult  // user turns only
	Content     []ContentPart // user turns only
}

// PendingResultText is the result Normalize gives a tool call whose result
// has not arrived yet. A RAP tool answers asynchronously, so the user may
// speak while it runs (RAP RT-3), but the model APIs demand an answer for
// every call before the conversation goes on.
const PendingResultText = "No result yet: this tool runs asynchronously and its result will arrive in a later message."

// ErrorResultNote is the text part Normalize puts before the content of a
// late error result, which has no tool-result block to carry its error flag.
const ErrorResultNote = "(the tool reported an error)"

// Normalize turns a runtime's conversation history into turns that the
// Anthropic Messages API and the OpenAI Chat Completions API both accept.
// Providers map the turns to their wire format; the repair itself is the
// same for every provider, so it lives here.
//
//   - A result that repeats one seen earlier in msgs (same call id, error
//     flag and content) is dropped: a redelivered result reaches the model
//     once (RAP RE-6).
//   - Messages with no text, calls or results are left out, and
//     consecutive messages of one role are merged into one turn (texts
//     joined by a blank line).
//   - Each call of an assistant turn is answered in the next user turn by
//     its result, or by PendingResultText when the result has not arrived
//     (RAP RT-3); a user turn is added after an assistant turn whose calls
//     would otherwise go unanswered.
//   - A result that answers no call of the turn before it (it arrived
//     late, or answers a call never seen) becomes Content of its user turn,
//     headed by its call id and, when known, the tool's name.
//
// Nothing else is dropped. Normalize fails, naming the message, on a role
// other than RoleUser and RoleAssistant, on tool results in an assistant
// message and on tool calls in a user message. It does not modify msgs.
//
// The gorap runtime arranges a thread's stored history before this
// (arrangeFrom in runtime/arrange.go, which says why the two differ): it
// alone knows where each result arrived and which placeholder a missing
// result gets, and on its output Normalize changes nothing but the shape
// of the turns. Normalize is the repair for every other conversation
// handed to a provider, such as MCP sampling requests (bridge/mcp).
func Normalize(msgs []Message) ([]Turn, error) {
	turns, _, err := NormalizeSettled(msgs, 0)
	return turns, err
}

// NormalizeSettled is Normalize that also reports how many leading turns
// are stable: made only of msgs[:settled] and closed by a later message of
// msgs[:settled], so that no message after them can change them. A
// provider encodes those once (Request.Settled).
func NormalizeSettled(msgs []Message, settled int) ([]Turn, int, error) {
	turns, stable, _, err := NormalizeStarts(msgs, settled)
	return turns, stable, err
}

// NormalizeStarts is NormalizeSettled that also returns the index in msgs
// of each turn's first message (len(msgs) for a last turn that only
// answers open calls), for NormalizeTail.
func NormalizeStarts(msgs []Message, settled int) (turns []Turn, stable int, starts []int, err error) {
	merged, firsts, err := mergeRoles(msgs, 0, nil)
	if err != nil {
		return nil, 0, nil, err
	}
	stable = stableTurns(firsts, settled, 0)
	// Each user turn is rebuilt in place: answer reads only the turns
	// before it, which are final by then (mergeRoles leaves room for one
	// more turn, so the closing append does not copy).
	out := merged
	var open []ToolCall // calls of the previous assistant turn
	for i, t := range merged {
		if t.Role == RoleAssistant { // merged turns alternate: open is empty here
			open = t.ToolCalls
			continue
		}
		out[i] = answer(open, t.ToolResults, t.Text, merged[:i])
		open = nil
	}
	if len(open) > 0 {
		out = append(out, answer(open, nil, "", merged))
		firsts = append(firsts, len(msgs))
	}
	return out, stable, firsts, nil
}

// stableTurns is the number of stable turns given the first message of
// each turn from turn base on: the last turn i >= 1 that starts with a
// settled message closes the turns before it.
func stableTurns(firsts []int, settled, base int) int {
	stable := 0
	for i := len(firsts) - 1; i >= 0; i-- {
		if base+i >= 1 && firsts[i] < settled {
			return base + i
		}
	}
	return stable
}

// NormalizeTail is NormalizeStarts from turn k >= 1 on, for a conversation
// whose turns k-1 and k start at msgs[prev] and msgs[from], as an earlier
// NormalizeStarts of it reported while both were stable (so no message
// added since can change them). It returns turns[k:], the number of stable
// turns and the first message of each returned turn, the same as
// NormalizeStarts would, without going over the turns before k again. ok
// is false when the tail cannot be normalised alone: a result of the tail
// answers no call of the turn before it (its header names a call of any
// earlier turn), or turn k no longer starts with a settled message. The
// caller then normalises the whole conversation.
func NormalizeTail(msgs []Message, settled, k, prev, from int) (turns []Turn, stable int, starts []int, ok bool, err error) {
	return normalizeTail(msgs, settled, k, prev, from, nil)
}

// normalizeTail is NormalizeTail; earlier, when not nil, holds the call id
// of every tool result in msgs[:from] (WireCache.resultIndex), so that a
// result of the tail is looked for among them only when its call id is
// there.
func normalizeTail(msgs []Message, settled, k, prev, from int, earlier map[string]struct{}) (turns []Turn, stable int, starts []int, ok bool, err error) {
	if k < 1 || prev < 0 || prev >= from || from >= len(msgs) || from >= settled {
		return nil, 0, nil, false, nil
	}
	merged, firsts, err := mergeRoles(msgs, from, earlier)
	if err != nil || len(merged) == 0 || firsts[0] != from || msgs[prev].Role == msgs[from].Role {
		return nil, 0, nil, false, err
	}
	var open []ToolCall
	if merged[0].Role == RoleUser {
		for _, m := range msgs[prev:from] {
			if m.Role != RoleAssistant {
				return nil, 0, nil, false, nil // turn k-1 is not the assistant turn before k
			}
			open = append(open[:len(open):len(open)], m.ToolCalls...)
		}
	}
	out := merged
	for i, t := range merged {
		if t.Role == RoleAssistant {
			open = t.ToolCalls
			continue
		}
		if late(open, t.ToolResults) {
			return nil, 0, nil, false, nil
		}
		out[i] = answer(open, t.ToolResults, t.Text, nil) // no late result: no header to name
		open = nil
	}
	if len(open) > 0 {
		out = append(out, answer(open, nil, "", nil))
		firsts = append(firsts, len(msgs))
	}
	return out, stableTurns(firsts[:len(merged)], settled, k), firsts, true, nil
}

// late reports whether a result answers no call of open (Normalize puts
// it in the turn's content, headed by a line naming its call).
func late(open []ToolCall, results []ToolResult) bool {
	if inOrder(open, results) {
		return false
	}
	var usedBuf [16]bool
	var used []bool
	if len(results) <= len(usedBuf) {
		used = usedBuf[:len(results)]
	} else {
		used = make([]bool, len(results))
	}
	n := 0
	for _, c := range open {
		if i := firstResult(results, c.ID); i >= 0 && !used[i] {
			used[i] = true
			n++
		}
	}
	return n < len(results)
}

// mergeRoles checks each message from msgs[from] on, drops redelivered
// results (of any earlier message) and empty messages, and merges
// consecutive messages of one role. User turns keep their text in Text
// until answer moves it into Content. earlier, when not nil, holds the
// call ids of the results in msgs[:from]: only those are searched there.
func mergeRoles(msgs []Message, from int, earlier map[string]struct{}) ([]Turn, []int, error) {
	var (
		// Only msgs[from:] are merged: size for them, not the history.
		merged = make([]Turn, 0, len(msgs)-from+1) // +1: NormalizeSettled may close it with a turn
		firsts = make([]int, 0, len(msgs)-from+1)  // index in msgs of each merged turn's first message
		// seen holds where each call id's first result kept is in msgs
		// (an index pair: a map of small values allocates less than one
		// of results); more holds the others (rare: a call has several
		// different results).
		seen = make(map[string]resultAt, (len(msgs)-from)/2)
		more map[string][]ToolResult
	)
	redelivered := func(r ToolResult, at resultAt) bool {
		if from > 0 && earlierSame(msgs[:from], r, earlier) {
			return true
		}
		first, ok := seen[r.CallID]
		if !ok {
			seen[r.CallID] = at
			return false
		}
		if r.same(msgs[first.msg].ToolResults[first.result]) || slices.ContainsFunc(more[r.CallID], r.same) {
			return true
		}
		if more == nil {
			more = map[string][]ToolResult{}
		}
		more[r.CallID] = append(more[r.CallID], r)
		return false
	}
	for i := from; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return nil, nil, fmt.Errorf("messages[%d]: role %q is neither %q nor %q", i, m.Role, RoleUser, RoleAssistant)
		}
		if m.Role == RoleAssistant && len(m.ToolResults) > 0 {
			return nil, nil, fmt.Errorf("messages[%d]: an assistant message carries tool results; put them in a user message", i)
		}
		if m.Role == RoleUser && len(m.ToolCalls) > 0 {
			return nil, nil, fmt.Errorf("messages[%d]: a user message carries tool calls; put them in an assistant message", i)
		}
		// results is m.ToolResults (clipped: a merge appends to a copy,
		// never into msgs) until a redelivered one is dropped.
		results := slices.Clip(m.ToolResults)
		for j, r := range m.ToolResults {
			if !redelivered(r, resultAt{int32(i), int32(j)}) {
				if len(results) < len(m.ToolResults) {
					results = append(results, r)
				}
				continue
			}
			if len(results) == len(m.ToolResults) {
				results = slices.Clone(m.ToolResults[:j]) // redelivered (RAP RE-6)
			}
		}
		if len(results) == 0 {
			results = nil
		}
		if m.Text == "" && len(m.ToolCalls) == 0 && len(results) == 0 {
			continue // nothing to say; the APIs reject empty messages
		}
		if n := len(merged); n > 0 && merged[n-1].Role == m.Role {
			last := &merged[n-1]
			last.Text = joinText(last.Text, m.Text)
			last.ToolCalls = append(last.ToolCalls, m.ToolCalls...)
			last.ToolResults = append(last.ToolResults, results...)
			continue
		}
		merged = append(merged, Turn{
			Role:        m.Role,
			Text:        m.Text,
			ToolCalls:   slices.Clip(m.ToolCalls), // a merge appends to a copy, never into msgs
			ToolResults: results,
		})
		firsts = append(firsts, i)
	}
	return merged, firsts, nil
}

// earlierSame reports whether a result of msgs is the same as r. A result
// is redelivered when it is the same as an earlier one kept; as sameness
// is transitive, that is when it is the same as any earlier one. ids, when
// not nil, holds the call id of every result of msgs: one not there has no
// earlier copy, and msgs is not searched.
func earlierSame(msgs []Message, r ToolResult, ids map[string]struct{}) bool {
	if ids != nil {
		if _, ok := ids[r.CallID]; !ok {
			return false
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, e := range msgs[i].ToolResults {
			if e.CallID == r.CallID && r.same(e) {
				return true
			}
		}
	}
	return false
}

// resultAt locates a tool result in a message list: msgs[msg].ToolResults[result].
type resultAt struct{ msg, result int32 }

// answer builds the user turn that follows an assistant turn whose calls
// are open. Results that answer an open call are placed in call order;
// calls without a result get PendingResultText; other results become
// Content, then text follows.
func answer(open []ToolCall, results []ToolResult, text string, before []Turn) Turn {
	u := Turn{Role: RoleUser}
	if inOrder(open, results) {
		// The usual turn: each call answered once, in call order. It
		// shares results (clipped), which nothing modifies.
		u.ToolResults = slices.Clip(results)
		if text != "" {
			u.Content = []ContentPart{{Type: "text", Text: text}}
		}
		return u
	}
	var usedBuf [16]bool
	var used []bool
	if len(results) <= len(usedBuf) {
		used = usedBuf[:len(results)]
	} else {
		used = make([]bool, len(results))
	}
	if len(open) > 0 {
		u.ToolResults = make([]ToolResult, 0, len(open))
	}
	for _, c := range open {
		if i := firstResult(results, c.ID); i >= 0 && !used[i] {
			used[i] = true
			u.ToolResults = append(u.ToolResults, results[i])
			continue
		}
		u.ToolResults = append(u.ToolResults, ToolResult{CallID: c.ID, Text: PendingResultText})
	}
	for i, r := range results {
		if used[i] {
			continue
		}
		u.Content = append(u.Content, ContentPart{Type: "text", Text: lateHeader(r.CallID, before)})
		if r.IsError {
			u.Content = append(u.Content, ContentPart{Type: "text", Text: ErrorResultNote})
		}
		u.Content = append(u.Content, r.Parts()...)
	}
	if text != "" {
		u.Content = append(u.Content, ContentPart{Type: "text", Text: text})
	}
	return u
}

// inOrder reports whether results answer the calls of open one for one, in
// the same order, with no other result for any of them.
func inOrder(open []ToolCall, results []ToolResult) bool {
	if len(open) == 0 || len(results) != len(open) {
		return false
	}
	for k, c := range open {
		if results[k].CallID != c.ID || firstResult(results, c.ID) != k {
			return false
		}
	}
	return true
}

// firstResult returns the index of the first result for call id, or -1.
// A turn holds few results: a scan costs less than building a map.
func firstResult(results []ToolResult, id string) int {
	for i, r := range results {
		if r.CallID == id {
			return i
		}
	}
	return -1
}

// lateHeader heads a result that arrived after its call was answered,
// naming the tool when a turn before holds the call (the latest such).
func lateHeader(callID string, before []Turn) string {
	for i := len(before) - 1; i >= 0; i-- {
		for _, c := range before[i].ToolCalls {
			if c.ID == callID {
				return fmt.Sprintf("Result of the earlier call %s to tool %s:", callID, c.Name)
			}
		}
	}
	return fmt.Sprintf("Result of the earlier tool call %s:", callID)
}

func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

// ImagePlaceholder is the text that stands in for an image a model must not
// receive (RAP RE-2): it names the media type and the approximate size, and
// why, but carries none of the image's bytes.
func ImagePlaceholder(p ContentPart, why string) string {
	mt := p.MediaType
	if mt == "" {
		mt = "unknown type"
	}
	return fmt.Sprintf("[image omitted (%s, about %d bytes): %s]", mt, decodedLen(p.Data), why)
}

// decodedLen is the length of the bytes that standard base64 b64 encodes.
func decodedLen(b64 string) int {
	n := base64.StdEncoding.DecodedLen(len(b64))
	return n - strings.Count(b64[max(0, len(b64)-2):], "=")
}
