package runtime

// This file owns the runtime's history fix-up for the model: arrangeFrom
// turns a thread's stored history, where each tool result sits where it
// arrived, into model messages in which every tool call is directly
// followed by its result or a placeholder, and a late result is a user
// note where it arrived (see "History sent to the model" in doc.go).
//
// model.Normalize (model/conversation.go) is not a second copy of this:
// the Anthropic and OpenAI providers run it on every request, after this.
// The two work on different inputs and neither can do the other's job:
//   - Only the stored history tells whether a result arrived in time: a
//     result stored after a later user message is late here (a
//     placeholder, then a note), but once results sit in user messages,
//     as model.Message holds them, Normalize would take it as the answer.
//     The placeholder texts depend on runtime state (an authorization in
//     progress, a call inherited from a parent thread), and the settled
//     prefix is cached per thread.
//   - Normalize repairs any []model.Message, from callers that never
//     had a stored history (MCP sampling in bridge/mcp, direct users of a
//     provider): it drops redelivered results, merges turns of one role
//     and answers unanswered calls. The model package cannot import
//     this one.
// On what arrangeFrom returns Normalize changes nothing but the shape of
// the turns: each call is already answered once and roles alternate.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// settled is how many leading messages of every request built from a
// (nil: none) read the same in every later request of the thread: all of
// its model form but the last message, which later user text can merge
// into, and but any placeholder of a missing result, whose text can
// change.
func (a *arranged) settled() int {
	if a == nil || len(a.msgs) == 0 {
		return 0
	}
	n := len(a.msgs) - 1
	for _, h := range a.holes {
		n = min(n, h.msg)
	}
	return n
}

// arrangeHistory implements the ordering rule: results that arrived before
// the next user or assistant message go right after their call; a missing
// result gets a placeholder, and a result arriving later is shown as a user
// note where it arrived.
func arrangeHistory(history []store.Message, images bool) []model.Message {
	return arrangeHistoryWith(joined{history, nil}, modelView{images: images}, nil)
}

// joined is two message lists read as one, head first, without copying.
type joined struct{ head, tail []store.Message }

func (h joined) len() int { return len(h.head) + len(h.tail) }

func (h joined) at(i int) *store.Message {
	if i < len(h.head) {
		return &h.head[i]
	}
	return &h.tail[i-len(h.head)]
}

// arrangeHistoryWith is arrangeHistory for a view, with the placeholder
// text of each call whose result is missing given by placeholder (nil:
// the default).
func arrangeHistoryWith(history joined, view modelView, placeholder func(callID string) string) []model.Message {
	out, _ := arrangeFrom(history, view, placeholder, nil)
	return out
}

// arranged is the model form of a prefix of a thread's saved history that
// later messages cannot change: every turn in it is followed by a message
// that is not a tool result, so its results in time are all known. Only
// the placeholders of missing results can read differently later (an
// authorization starts or ends), so they are kept as holes and filled on
// each use. The last message can still be merged into by the next user
// text; the copy handed out is, the arranged prefix is not.
type arranged struct {
	upto  int             // history messages covered
	view  modelView       // how results were shown: images, bound (bounds.go)
	msgs  []model.Message // the model form; never handed out, only copied
	holes []hole
	// buf is the array the thread's previous request was built in, reused
	// for the next one: a model does not keep a request after Complete
	// returns (model.Provider), and a thread runs one slice at a time
	// (RAP RT-2), so it is free by then.
	buf *[]model.Message
}

// hole is a placeholder result: msgs[msg].ToolResults[res] stands for the
// missing result of callID.
type hole struct {
	msg, res int
	callID   string
}

// arrangeFrom arranges history for the model as view shows results,
// starting from prev, the arranged form of a prefix of the same history
// (nil: from the start), and returns the messages and the arranged form of
// the longest prefix of history.head now settled, for the next call. The
// messages returned are the caller's own. A result is bounded here
// (model.BoundResult), so the arranged prefix holds it bounded, and a
// result reads the same in every request.
func arrangeFrom(history joined, view modelView, placeholder func(callID string) string, prev *arranged) ([]model.Message, *arranged) {
	if placeholder == nil {
		placeholder = func(string) string { return pendingResultText }
	}
	if prev != nil && (prev.view != view || prev.upto > len(history.head)) {
		prev = nil
	}
	// This runs for every completion, so it keeps no index of the calls:
	// the few lookups it needs scan a short stretch.
	var out []model.Message
	var buf *[]model.Message
	if prev != nil && prev.buf != nil && cap(*prev.buf) >= history.len() {
		buf = prev.buf
		out = (*buf)[:0]
	} else {
		// Room to grow by a few turns before the next allocation.
		buf = new([]model.Message)
		out = make([]model.Message, 0, history.len()+history.len()/4+8)
	}
	var holes []hole
	start := 0
	if prev != nil {
		start = prev.upto
		out = append(out, prev.msgs...)
		holes = append(holes, prev.holes...)
		for _, h := range prev.holes {
			if text := placeholder(h.callID); out[h.msg].ToolResults[h.res].Text != text {
				// The arranged prefix shares its results: change a copy.
				out[h.msg].ToolResults = append([]model.ToolResult(nil), out[h.msg].ToolResults...)
				out[h.msg].ToolResults[h.res].Text = text
			}
		}
	}
	// The settled prefix: history[:cut] arranges to out[:cutLen-1] plus
	// last, the last message as it was before later ones merged into it.
	cut, cutLen, cutHoles := start, len(out), len(holes)
	var last model.Message
	if cutLen > 0 {
		last = out[cutLen-1]
	}
	addUserText := func(text string) {
		// Consecutive user content is merged into one message, so roles
		// alternate as every provider expects.
		if n := len(out); n > 0 && out[n-1].Role == model.RoleUser {
			if out[n-1].Text != "" {
				text = out[n-1].Text + "\n\n" + text
			}
			out[n-1].Text = text
			return
		}
		out = append(out, model.Message{Role: model.RoleUser, Text: text})
	}
	for i := start; i < history.len(); i++ {
		m := history.at(i)
		if i > cut && i < len(history.head) && m.Role != store.RoleTool {
			// Every turn before i has all the results it will have in
			// time: what came before is settled.
			cut, cutLen, cutHoles = i, len(out), len(holes)
			if cutLen > 0 {
				last = out[cutLen-1]
			}
		}
		switch m.Role {
		case store.RoleUser:
			addUserText(m.Text)
		case store.RoleAssistant:
			if m.Text == "" && len(m.ToolCalls) == 0 {
				continue // an empty reply: providers refuse empty messages
			}
			am := model.Message{Role: model.RoleAssistant, Text: m.Text}
			if len(m.ToolCalls) > 0 {
				am.ToolCalls = make([]model.ToolCall, 0, len(m.ToolCalls))
			}
			for _, c := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			if n := len(out); n > 0 && out[n-1].Role == model.RoleAssistant && len(out[n-1].ToolCalls) == 0 {
				// An injected event call right after a text-only reply: one
				// assistant message, so roles keep alternating.
				am.Text = strings.TrimSpace(out[n-1].Text + "\n\n" + am.Text)
				out[n-1] = am
			} else {
				out = append(out, am)
			}
			if len(m.ToolCalls) == 0 {
				continue
			}
			// Gather the results that arrived in time, in call order.
			um := model.Message{Role: model.RoleUser, ToolResults: make([]model.ToolResult, 0, len(m.ToolCalls))}
			for _, c := range m.ToolCalls {
				res, ok := resultInTime(history, i, c.ID)
				if !ok {
					holes = append(holes, hole{msg: len(out), res: len(um.ToolResults), callID: c.ID})
					um.ToolResults = append(um.ToolResults, model.ToolResult{CallID: c.ID, Text: placeholder(c.ID)})
					continue
				}
				um.ToolResults = append(um.ToolResults, modelResult(res, view))
			}
			out = append(out, um)
		case store.RoleTool:
			// Results placed after their call are skipped here; late ones
			// become a note where they arrived.
			owner := runOwner(history, i)
			for _, res := range m.ToolResults {
				if owner != nil && hasCall(owner, res.CallID) {
					continue
				}
				name := callName(history, i, res.CallID)
				if name == "" {
					name = res.Name
				}
				addUserText(fmt.Sprintf("Result of the earlier call %s (%s), which arrived after the conversation moved on:\n%s",
					res.CallID, name, model.BoundText(modelText(res, view.images), view.maxResultTokens)))
			}
		}
	}
	*buf = out[:0]
	if prev != nil && cut == prev.upto {
		prev.buf = buf
		return out, prev // nothing newly settled
	}
	next := &arranged{upto: cut, view: view, holes: slices.Clip(holes[:cutHoles]), buf: buf}
	if cutLen > 0 {
		// Extend prev's array in place: its last message may have been
		// merged into since, so it is written again. Slices of a thread
		// never overlap (RAP RT-2) and prev was copied above, so nobody
		// reads it meanwhile; the cache keeps only next.
		keep := 0
		if prev != nil && len(prev.msgs) > 0 {
			keep = len(prev.msgs) - 1
			next.msgs = prev.msgs[:keep]
		}
		next.msgs = append(next.msgs, out[keep:cutLen-1]...)
		next.msgs = append(next.msgs, last)
	}
	return out, next
}

// runOwner returns the assistant message with tool calls that directly
// precedes the run of tool messages holding history[i], or nil.
func runOwner(history joined, i int) *store.Message {
	for k := i - 1; k >= 0; k-- {
		m := history.at(k)
		if m.Role == store.RoleTool {
			continue
		}
		if m.Role == store.RoleAssistant && len(m.ToolCalls) > 0 {
			return m
		}
		return nil
	}
	return nil
}

func hasCall(m *store.Message, callID string) bool {
	for _, c := range m.ToolCalls {
		if c.ID == callID {
			return true
		}
	}
	return false
}

// callName returns the tool name of callID from the latest call before
// history[i] that has it, or "".
func callName(history joined, i int, callID string) string {
	for k := i - 1; k >= 0; k-- {
		for _, c := range history.at(k).ToolCalls {
			if c.ID == callID {
				return c.Name
			}
		}
	}
	return ""
}

// resultInTime returns the first result of callID among the tool messages
// that directly follow history[i].
func resultInTime(history joined, i int, callID string) (store.ToolResult, bool) {
	for j := i + 1; j < history.len() && history.at(j).Role == store.RoleTool; j++ {
		for _, res := range history.at(j).ToolResults {
			if res.CallID == callID {
				return res, true
			}
		}
	}
	return store.ToolResult{}, false
}

// modelResult converts a stored result for the model as view shows it:
// without image support each image becomes a text placeholder (RAP RE-2),
// and text over view.maxResultTokens is cut (model.BoundResult).
func modelResult(res store.ToolResult, view modelView) model.ToolResult {
	return model.BoundResult(convertResult(res, view.images), view.maxResultTokens)
}

// convertResult converts a stored result for the model, whole. Without
// image support each image becomes a text placeholder (RAP RE-2).
func convertResult(res store.ToolResult, images bool) model.ToolResult {
	out := model.ToolResult{CallID: res.CallID, IsError: res.IsError}
	if len(res.Content) == 0 {
		out.Text = res.Text
		return out
	}
	if !images {
		out.Text = modelText(res, false)
		return out
	}
	for _, c := range res.Content {
		switch c.Type {
		case "image":
			out.Content = append(out.Content, model.ContentPart{Type: "image", Data: c.Data, MediaType: c.MediaType})
		default:
			out.Content = append(out.Content, model.ContentPart{Type: "text", Text: c.Text})
		}
	}
	return out
}

// modelText is the text form of a result: its text items with a
// placeholder per image when images are not accepted (RAP RE-2).
func modelText(res store.ToolResult, images bool) string {
	if len(res.Content) == 0 {
		return res.Text
	}
	r := rap.ToolResult{Content: res.Content}
	if !images {
		return r.ModelText()
	}
	var parts []string
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		} else {
			parts = append(parts, fmt.Sprintf("[image %s]", c.MediaType))
		}
	}
	return strings.Join(parts, "\n")
}
