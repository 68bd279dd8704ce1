package runtime

// This file owns a slice's inputs: decoding the queued inbox rows into a
// batch of history messages (results, user messages and notes, injected
// events and child reports), and deciding whether the batch needs a
// completion now.

import (
	"encoding/json"
	"fmt"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// batch is a thread's queued inbox rows, decoded.
type batch struct {
	ids     []int64
	results []store.ToolResult
	users   []store.Message // user messages and runtime notes, in order
	events  []store.Message // synthetic call/result pairs for inline events and child reports
	// interrupts is true when a user message is among the inputs: pending
	// calls are then closed before it is added (RAP CA-1).
	interrupts bool
	// wake is true when a row asks for a completion without adding history.
	wake bool
}

// messages returns the history messages the batch adds, results first so
// they directly follow the calls they answer.
func (b *batch) messages() []store.Message {
	var out []store.Message
	if len(b.results) > 0 {
		out = append(out, store.Message{Role: store.RoleTool, ToolResults: b.results})
	}
	out = append(out, b.events...)
	return append(out, b.users...)
}

// needsCompletion reports whether the batch should be answered by the
// model now. A batch of only tool results waits while another call of the
// same turn is still pending, so the model sees a turn's results together.
// pending are the thread's pending calls; known holds them and the calls
// the batch's results answer.
func needsCompletion(b *batch, pending []store.Call, known map[string]store.Call) bool {
	if len(b.users) > 0 || len(b.events) > 0 || b.wake {
		return true
	}
	if len(b.results) == 0 {
		return false
	}
	answered := map[string]bool{}
	turns := map[int64]bool{}
	unrecorded := false
	for _, res := range b.results {
		answered[res.CallID] = true
		if c, ok := known[res.CallID]; ok {
			turns[c.TurnSeq] = true
		} else {
			unrecorded = true
		}
	}
	for _, c := range pending {
		if turns[c.TurnSeq] && !answered[c.CallID] {
			delete(turns, c.TurnSeq) // this turn still waits for a result
		}
	}
	// Run the model if some turn is now complete, or if a result belongs to
	// no recorded call (it cannot wait for anything).
	return len(turns) > 0 || unrecorded
}

// referencedCalls returns the call ids the inbox rows belong to: those of
// subscription events, and those of tool results when withResults, so the
// slice can load those calls. Undecodable rows are skipped here and
// reported by decodeBatch.
func referencedCalls(items []store.InboxItem, withResults bool) []string {
	var ids []string
	for _, it := range items {
		var ref struct {
			CallID     string `json:"call_id"`
			ToolCallID string `json:"tool_call_id"`
		}
		switch {
		case it.Kind == store.KindToolResult && withResults:
			if json.Unmarshal(it.Payload, &ref) == nil && ref.CallID != "" {
				ids = append(ids, ref.CallID)
			}
		case it.Kind == store.KindSubscriptionEvent:
			if json.Unmarshal(it.Payload, &ref) == nil && ref.ToolCallID != "" {
				ids = append(ids, ref.ToolCallID)
			}
		}
	}
	return ids
}

// decodeBatch turns inbox rows into history messages. A row that cannot be
// decoded (which only a bug or a hand-edited database produces) is
// consumed and reported instead of blocking the thread forever.
func (r *Runtime) decodeBatch(threadID string, items []store.InboxItem, byID map[string]store.Call) *batch {
	b := &batch{}
	bad := func(it store.InboxItem, err error) {
		r.log.Error("dropping undecodable inbox row", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind, "err", err)
	}
	for _, it := range items {
		b.ids = append(b.ids, it.ID)
		switch it.Kind {
		case store.KindUserMessage, store.KindNote:
			var m store.UserMessage
			if err := json.Unmarshal(it.Payload, &m); err != nil {
				bad(it, err)
				continue
			}
			b.users = append(b.users, store.Message{Role: store.RoleUser, Text: m.Text, Created: it.Created})
			if it.Kind == store.KindUserMessage {
				b.interrupts = true
			}
		case store.KindToolResult:
			var res store.ToolResult
			if err := json.Unmarshal(it.Payload, &res); err != nil {
				bad(it, err)
				continue
			}
			b.results = append(b.results, res)
		case store.KindSubscriptionEvent:
			var ev rap.SubscriptionEvent
			if err := json.Unmarshal(it.Payload, &ev); err != nil {
				bad(it, err)
				continue
			}
			orig := byID[ev.ToolCallID]
			b.events = append(b.events, injectedPair(fmt.Sprintf("event_%d_%s", it.ID, ev.ToolCallID), orig.ToolName, ev.ToolCallID,
				orig.Arguments, ev.Text, fmt.Sprintf("event from %s", orig.ToolName))...)
		case store.KindChildReport:
			var rep store.ChildReport
			if err := json.Unmarshal(it.Payload, &rep); err != nil {
				bad(it, err)
				continue
			}
			verb := "Report"
			if rep.Final {
				verb = "Final report"
			}
			text := fmt.Sprintf("%s from child thread %s:\n%s", verb, rep.ChildID, rep.Report)
			if rep.Final && rep.Report == "" {
				text = shutdownText(rep.ChildID) // closed without a report
			}
			b.events = append(b.events, injectedPair(fmt.Sprintf("report_%d", it.ID), rep.OriginTool, rep.OriginCallID, rep.OriginArgs,
				text, fmt.Sprintf("report from thread %s", rep.ChildID))...)
		case store.KindWake:
			if wakeAsksCompletion(it.Payload) {
				b.wake = true
			}
		default:
			r.log.Error("dropping inbox row of unknown kind", "thread", threadID, "inbox_id", it.ID, "kind", it.Kind)
		}
	}
	return b
}

// InjectedToolName is the reserved tool name of the synthetic call that
// carries a subscription event or a child thread's report into a thread
// (RAP SU-5, BT-3). It is never offered to the model, and a model call to
// it gets an error result.
const InjectedToolName = "receive_event__injected"

// injectedPair renders an event as a synthetic assistant call of the
// reserved tool, tied to the original call, and its result (RAP SU-5).
func injectedPair(id, origTool, origCallID string, origArgs json.RawMessage, text, display string) []store.Message {
	args, _ := json.Marshal(map[string]any{
		"original_tool_name":    origTool,
		"original_tool_call_id": origCallID,
		"original_args":         json.RawMessage(nonEmptyJSON(origArgs)),
	})
	return []store.Message{
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: id, Name: InjectedToolName, Arguments: args, Display: display}}},
		{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: id, Name: InjectedToolName, Text: text}}},
	}
}

func nonEmptyJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}
