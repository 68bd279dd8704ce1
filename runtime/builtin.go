package runtime

// This file owns the built-in tools' table (names, schemas, BuiltinTools)
// and execBuiltin, which runs a built-in call inside the slice's commit
// transaction by calling the built-in's own function (builtin_*.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// Names of the built-in tools (RAP BT-1 to BT-7). They are offered to the
// model in every session next to the toolsets' tools; a toolset tool with
// the same name is hidden behind the built-in.
const (
	BuiltinSleep                 = "sleep"
	BuiltinSleepUntil            = "sleep_until"
	BuiltinSleepUntilEventOrUser = "sleep_until_event_or_input"
	BuiltinSpawnThread           = "spawn_thread"
	BuiltinReportToParent        = "report_to_parent"
	BuiltinCloseThread           = "close_thread"
	BuiltinSendMessageToChild    = "send_message_to_child"
	BuiltinCancelSubscription    = "cancel_subscription"
)

// builtinToolset is the Toolset recorded for calls of built-in tools.
const builtinToolset = "builtin"

// MaxSleep bounds how far in the future sleep and sleep_until may wake.
const MaxSleep = 366 * 24 * time.Hour

// maxBuiltinText bounds a report or a message to a child.
const maxBuiltinText = MaxMessageBytes

// builtinSpecs are the built-in tools as offered to the model.
var builtinSpecs = []model.ToolSpec{
	{Name: BuiltinSleep, Description: "Pause this thread for a number of seconds and wake up afterwards. " +
		"A user message or event that arrives meanwhile wakes the thread at once and ends the sleep.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"description":"How long to sleep, in seconds."},"reason":{"type":"string","description":"Why, for people reading the conversation."}},"required":["seconds"],"additionalProperties":false}`)},
	{Name: BuiltinSleepUntil, Description: "Pause this thread until a wall-clock time and wake up then. A time in the past wakes at once.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"date":{"type":"string","description":"Day to wake, YYYY-MM-DD."},"time":{"type":"string","description":"Time to wake, HH:MM or HH:MM:SS, 24-hour clock."},"timezone":{"type":"string","description":"IANA time zone such as Europe/Paris; UTC when left out."}},"required":["date","time"],"additionalProperties":false}`)},
	{Name: BuiltinSleepUntilEventOrUser, Description: "End this turn and wait, at no cost, until the next user message or subscription event arrives. " +
		"Use it after setting up subscriptions when there is nothing else to do.",
		InputSchema: rap.EmptyObjectSchema},
	{Name: BuiltinSpawnThread, Description: "Start a child thread that works in parallel on the given instructions. The child sees this conversation " +
		"up to now, not what happens here later; it reports back with report_to_parent. Say in the instructions what you will do meanwhile, " +
		"so the child does not repeat it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"instructions":{"type":"string","description":"What the child thread should do."},"child_of":{"type":"array","items":{"type":"string"},"description":"Your own thread stack, from the root thread to the current thread, such as [\"R\"] in the root thread R or [\"R\",\"A\"] in its child A."}},"required":["instructions","child_of"],"additionalProperties":false}`)},
	{Name: BuiltinReportToParent, Description: "Send a report to the parent thread without closing this thread.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"report":{"type":"string","description":"What the parent thread needs to know."}},"required":["report"],"additionalProperties":false}`)},
	{Name: BuiltinCloseThread, Description: "Close a thread (this one, or one of its direct children), optionally with a last report to its parent. " +
		"A closed thread receives nothing more.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"thread_id":{"type":"string","description":"The thread to close."},"report_to_parent":{"type":"string","description":"A last report for the closed thread's parent."}},"required":["thread_id"],"additionalProperties":false}`)},
	{Name: BuiltinSendMessageToChild, Description: "Send a message to one of this thread's direct children; it wakes the child.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"thread_id":{"type":"string","description":"The child thread."},"message":{"type":"string","description":"The message."}},"required":["thread_id","message"],"additionalProperties":false}`)},
	{Name: BuiltinCancelSubscription, Description: "Cancel an active subscription of this thread: no more events arrive from it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tool_call_id":{"type":"string","description":"The id of the tool call that created the subscription."}},"required":["tool_call_id"],"additionalProperties":false}`)},
}

// isBuiltin reports whether name is a built-in tool.
func isBuiltin(name string) bool {
	return slices.ContainsFunc(builtinSpecs, func(s model.ToolSpec) bool { return s.Name == name })
}

// BuiltinTools returns the built-in tools as offered to the model.
func BuiltinTools() []model.ToolSpec { return slices.Clone(builtinSpecs) }

// decodeStrict decodes built-in arguments, refusing unknown members.
func decodeStrict(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// builtinError is the result text of a refused built-in call (RAP RE-4).
func builtinError(name, format string, a ...any) string {
	return "Error: " + name + ": " + fmt.Sprintf(format, a...)
}

// execBuiltin runs one built-in call inside the slice's commit transaction.
// It returns the call's result, or ok=false when the call stays pending
// (sleep, sleep_until: their timer delivers the result). Each built-in is
// a function of its own: builtin_sleep.go, builtin_threads.go,
// builtin_subscriptions.go.
func (r *Runtime) execBuiltin(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (res store.ToolResult, ok bool, err error) {
	switch c.Name {
	case BuiltinSleep, BuiltinSleepUntil:
		return r.execSleep(tx, th, c, fx)
	case BuiltinSleepUntilEventOrUser:
		return r.execSleepUntilEventOrInput(tx, th, c, fx)
	case BuiltinSpawnThread:
		return r.execSpawnThread(tx, th, c, fx)
	case BuiltinReportToParent:
		return r.execReportToParent(tx, th, c, fx)
	case BuiltinCloseThread:
		return r.execCloseThread(tx, th, c, fx)
	case BuiltinSendMessageToChild:
		return r.execSendMessageToChild(tx, th, c, fx)
	case BuiltinCancelSubscription:
		return r.execCancelSubscription(tx, th, c, fx)
	}
	_, fail, _ := builtinReply(c)
	return fail("is not a built-in tool")
}

// builtinReply returns the result of the built-in call c, not filled in
// yet, and the two ways a built-in finishes it: fail, an error result
// (RAP RE-4), and done.
func builtinReply(c store.ToolCall) (res store.ToolResult, fail func(format string, a ...any) (store.ToolResult, bool, error), done func(text string) (store.ToolResult, bool, error)) {
	res = store.ToolResult{CallID: c.ID, Name: c.Name}
	fail = func(format string, a ...any) (store.ToolResult, bool, error) {
		res.Text, res.IsError = builtinError(c.Name, format, a...), true
		return res, true, nil
	}
	done = func(text string) (store.ToolResult, bool, error) {
		res.Text = text
		return res, true, nil
	}
	return res, fail, done
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
