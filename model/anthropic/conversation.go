package anthropic

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/gorap/gorap/model"
)

// turn is one conversation message after normalization: consecutive
// messages of one role are merged, every tool call of an assistant turn is
// answered in the user turn that follows it, and results that answer no call
// of the preceding assistant turn are kept as plain content.
type turn struct {
	role    model.Role
	text    string
	calls   []model.ToolCall
	results []model.ToolResult  // user turns: results of the previous turn's calls, in call order
	parts   []model.ContentPart // user turns: content after the results (stray results, then text)
}

// pendingResultText answers a tool call whose result has not arrived yet: a
// RAP tool answers asynchronously, so a user message may come first (RAP
// RT-3), but the model API demands an answer for every call.
const pendingResultText = "No result yet: this tool runs asynchronously and its result will arrive in a later message."

// normalize turns the runtime's conversation into one the Messages API
// accepts. It never drops content: a result that does not answer a call of
// the immediately preceding assistant turn becomes text in its user turn.
func normalize(msgs []model.Message) ([]turn, error) {
	var merged []turn
	for i, m := range msgs {
		if m.Role != model.RoleUser && m.Role != model.RoleAssistant {
			return nil, fmt.Errorf("messages[%d]: role %q is neither %q nor %q", i, m.Role, model.RoleUser, model.RoleAssistant)
		}
		if m.Role == model.RoleAssistant && len(m.ToolResults) > 0 {
			return nil, fmt.Errorf("messages[%d]: an assistant message carries tool results; put them in a user message", i)
		}
		if m.Role == model.RoleUser && len(m.ToolCalls) > 0 {
			return nil, fmt.Errorf("messages[%d]: a user message carries tool calls; put them in an assistant message", i)
		}
		if m.Text == "" && len(m.ToolCalls) == 0 && len(m.ToolResults) == 0 {
			continue // nothing to say; the API rejects empty turns
		}
		if n := len(merged); n > 0 && merged[n-1].role == m.Role {
			last := &merged[n-1]
			last.text = joinText(last.text, m.Text)
			last.calls = append(last.calls, m.ToolCalls...)
			last.results = append(last.results, m.ToolResults...)
			continue
		}
		merged = append(merged, turn{
			role:    m.Role,
			text:    m.Text,
			calls:   append([]model.ToolCall(nil), m.ToolCalls...),
			results: append([]model.ToolResult(nil), m.ToolResults...),
		})
	}

	names := map[string]string{} // call id -> tool name, for stray results
	var out []turn
	var open []model.ToolCall // calls of the previous assistant turn
	for _, t := range merged {
		if t.role == model.RoleAssistant {
			if len(open) > 0 {
				out = append(out, link(open, nil, "", names))
			}
			for _, c := range t.calls {
				names[c.ID] = c.Name
			}
			open = t.calls
			out = append(out, turn{role: model.RoleAssistant, text: t.text, calls: t.calls})
			continue
		}
		out = append(out, link(open, t.results, t.text, names))
		open = nil
	}
	if len(open) > 0 {
		out = append(out, link(open, nil, "", names))
	}
	return out, nil
}

// link builds the user turn that follows an assistant turn with calls open.
// Results that answer an open call are placed in call order; calls without a
// result get the pending text; other results become content parts headed by
// the call id and, from names, the tool's name.
func link(open []model.ToolCall, results []model.ToolResult, text string, names map[string]string) turn {
	u := turn{role: model.RoleUser}
	byID := make(map[string]int, len(results))
	used := make([]bool, len(results))
	for i, r := range results {
		if _, dup := byID[r.CallID]; !dup {
			byID[r.CallID] = i
		}
	}
	for _, c := range open {
		if i, ok := byID[c.ID]; ok && !used[i] {
			used[i] = true
			u.results = append(u.results, results[i])
			continue
		}
		u.results = append(u.results, model.ToolResult{CallID: c.ID, Text: pendingResultText})
	}
	for i, r := range results {
		if used[i] || redelivered(r, results, used) {
			continue
		}
		u.parts = append(u.parts, model.ContentPart{Type: "text", Text: strayHeader(r.CallID, names)})
		if r.IsError {
			u.parts = append(u.parts, model.ContentPart{Type: "text", Text: "(the tool reported an error)"})
		}
		u.parts = append(u.parts, resultParts(r)...)
	}
	if text != "" {
		u.parts = append(u.parts, model.ContentPart{Type: "text", Text: text})
	}
	return u
}

// redelivered reports whether r repeats a result already placed (RAP RE-6:
// a redelivered result does not appear twice).
func redelivered(r model.ToolResult, results []model.ToolResult, used []bool) bool {
	for i, u := range results {
		if used[i] && u.CallID == r.CallID && u.Text == r.Text && u.IsError == r.IsError && slices.Equal(u.Content, r.Content) {
			return true
		}
	}
	return false
}

func strayHeader(callID string, names map[string]string) string {
	if name, ok := names[callID]; ok {
		return fmt.Sprintf("Result of the earlier call %s to tool %s:", callID, name)
	}
	return fmt.Sprintf("Result of the earlier tool call %s:", callID)
}

// resultParts is a result's content: Content when present, Text otherwise.
func resultParts(r model.ToolResult) []model.ContentPart {
	if len(r.Content) > 0 {
		return r.Content
	}
	return []model.ContentPart{{Type: "text", Text: r.Text}}
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

// imagePlaceholder stands in for an image the model must not receive (RAP
// RE-2). It describes the image without carrying any of its bytes.
func imagePlaceholder(p model.ContentPart, why string) string {
	mt := p.MediaType
	if mt == "" {
		mt = "unknown type"
	}
	return fmt.Sprintf("[image omitted (%s, about %d bytes): %s]", mt, decodedLen(p.Data), why)
}

func decodedLen(b64 string) int {
	n := base64.StdEncoding.DecodedLen(len(b64))
	return n - strings.Count(b64[max(0, len(b64)-2):], "=")
}
