package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Names of the built-in tools (RAP BT-1 to BT-6). They are offered to the
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
// (sleep, sleep_until: their timer delivers the result).
func (r *Runtime) execBuiltin(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (res store.ToolResult, ok bool, err error) {
	res = store.ToolResult{CallID: c.ID, Name: c.Name}
	fail := func(format string, a ...any) (store.ToolResult, bool, error) {
		res.Text, res.IsError = builtinError(c.Name, format, a...), true
		return res, true, nil
	}
	done := func(text string) (store.ToolResult, bool, error) {
		res.Text = text
		return res, true, nil
	}
	switch c.Name {
	case BuiltinSleep, BuiltinSleepUntil:
		due, what, msg := sleepDue(c.Name, c.Arguments, time.Now())
		if msg != "" {
			return fail("%s", msg)
		}
		payload, _ := json.Marshal(sleepPayload{CallID: c.ID, Text: "Woke up after " + what + "."})
		if err := tx.PutTimer(store.Timer{ID: sleepTimerID(th.ID, c.ID), ThreadID: th.ID, Kind: timerSleep, Payload: payload, Due: due}); err != nil {
			return res, false, err
		}
		fx.timers = true
		fx.calls = append(fx.calls, store.Call{ThreadID: th.ID, CallID: c.ID, ToolName: c.Name, Arguments: c.Arguments,
			Toolset: builtinToolset, State: store.CallDispatched})
		return res, false, nil

	case BuiltinSleepUntilEventOrUser:
		var a struct{}
		if err := decodeStrict(c.Arguments, &a); err != nil {
			return fail("takes no arguments (%v); call it with {}", err)
		}
		fx.stop = true
		return done("Waiting for the next user message or subscription event.")

	case BuiltinSpawnThread:
		var a struct {
			Instructions string   `json:"instructions"`
			ChildOf      []string `json:"child_of"`
		}
		if err := decodeStrict(c.Arguments, &a); err != nil {
			return fail("arguments are not {\"instructions\": string, \"child_of\": [string]}: %v", err)
		}
		if strings.TrimSpace(a.Instructions) == "" {
			return fail("instructions is empty; say what the child thread should do")
		}
		stack, err := threadStack(tx, th)
		if err != nil {
			return res, false, err
		}
		if !slices.Equal(stack, a.ChildOf) {
			// RAP BT-2: a child that inherited its parent's plans must not
			// carry them out again.
			return fail("child_of must be your own thread stack %s, got %s. You are thread %s: if you are a child thread, work on your own task instead of repeating your parent's plans",
				jsonString(stack), jsonString(a.ChildOf), th.ID)
		}
		child := store.Thread{ID: store.NewThreadID(), ParentID: th.ID, RootID: th.RootID, Status: store.ThreadActive,
			OriginCallID: c.ID, OriginTool: c.Name, OriginArgs: c.Arguments}
		if err := r.createChild(tx, child, th.ID); err != nil {
			return res, false, err
		}
		seed := store.Message{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: c.ID, Name: c.Name,
			Text: fmt.Sprintf("You are now inside the spawned thread. Follow the instructions of the spawn_thread call above. Your thread id is %s and your thread stack is %s. "+
				"Report what you find with report_to_parent, and call close_thread with your thread id when you are done.", child.ID, jsonString(append(stack, child.ID)))}}}
		if _, err := tx.AppendMessages(child.ID, []store.Message{seed}); err != nil {
			return res, false, err
		}
		if _, err := tx.Enqueue(store.InboxItem{ThreadID: child.ID, Kind: store.KindWake, Payload: json.RawMessage(`{"reason":"spawned"}`),
			DedupKey: "wake:" + child.ID}); err != nil {
			return res, false, err
		}
		fx.wake = append(fx.wake, child.ID)
		fx.event(th.ID, EventThreadSpawned, api.ThreadSpawned{ThreadID: child.ID, ParentID: th.ID, OriginCallID: c.ID, OriginTool: c.Name, Reason: api.SpawnThread})
		return done(fmt.Sprintf("Child thread spawned with id %s. It runs on its own and reports back; go on with your own work.", child.ID))

	case BuiltinReportToParent:
		var a struct {
			Report string `json:"report"`
		}
		if err := decodeStrict(c.Arguments, &a); err != nil {
			return fail("arguments are not {\"report\": string}: %v", err)
		}
		if strings.TrimSpace(a.Report) == "" || len(a.Report) > maxBuiltinText {
			return fail("report must be 1 to %d bytes of text", maxBuiltinText)
		}
		if th.ParentID == "" {
			return fail("this is a root thread and has no parent; answer the user directly")
		}
		sent, err := r.report(tx, th, c.ID, a.Report, false, fx)
		if err != nil {
			return res, false, err
		}
		if !sent {
			return fail("the parent thread %s is closed; the report was not delivered", th.ParentID)
		}
		return done("Report sent to the parent thread.")

	case BuiltinCloseThread:
		var a struct {
			ThreadID       string  `json:"thread_id"`
			ReportToParent *string `json:"report_to_parent"`
		}
		if err := decodeStrict(c.Arguments, &a); err != nil {
			return fail("arguments are not {\"thread_id\": string, \"report_to_parent\"?: string}: %v", err)
		}
		target := th
		if a.ThreadID != th.ID {
			t, err := tx.Thread(a.ThreadID)
			if errors.Is(err, store.ErrNotFound) || (err == nil && t.ParentID != th.ID) {
				return fail("thread %q is neither this thread (%s) nor one of its direct children", a.ThreadID, th.ID)
			}
			if err != nil {
				return res, false, err
			}
			target = t
		}
		if target.ParentID == "" {
			// issue 9 item 6: the conversation the user started is theirs
			// to end.
			return fail("thread %s is the root thread; root threads are closed by the user (through the client API), not with close_thread. "+
				"To end your turn, answer the user; to wait, call %s", target.ID, BuiltinSleepUntilEventOrUser)
		}
		if target.Status == store.ThreadClosed {
			return done(fmt.Sprintf("Thread %s was already closed.", target.ID))
		}
		reported := false
		if a.ReportToParent != nil && strings.TrimSpace(*a.ReportToParent) != "" {
			if len(*a.ReportToParent) > maxBuiltinText {
				return fail("report_to_parent is longer than %d bytes", maxBuiltinText)
			}
			if _, err := r.report(tx, target, c.ID, *a.ReportToParent, true, fx); err != nil {
				return res, false, err
			}
			reported = true
		}
		if err := r.closeThreadTx(tx, target, fx); err != nil {
			return res, false, err
		}
		if !reported && target.ID == th.ID {
			// A parent that closes its child knows; a child that closes
			// itself tells its parent (issue 9 item 6).
			if err := r.reportShutdown(tx, target, fx); err != nil {
				return res, false, err
			}
		}
		if target.ID == th.ID {
			fx.stop = true
		}
		return done(fmt.Sprintf("Thread %s is closed.", target.ID))

	case BuiltinSendMessageToChild:
		var a struct {
			ThreadID string `json:"thread_id"`
			Message  string `json:"message"`
		}
		if err := decodeStrict(c.Arguments, &a); err != nil {
			return fail("arguments are not {\"thread_id\": string, \"message\": string}: %v", err)
		}
		if strings.TrimSpace(a.Message) == "" || len(a.Message) > maxBuiltinText {
			return fail("message must be 1 to %d bytes of text", maxBuiltinText)
		}
		t, err := tx.Thread(a.ThreadID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && t.ParentID != th.ID) {
			// RAP BT-5: direct children only.
			return fail("thread %q is not a direct child of this thread (%s)", a.ThreadID, th.ID)
		}
		if err != nil {
			return res, false, err
		}
		if t.Status == store.ThreadClosed {
			return fail("child thread %s is closed", t.ID)
		}
		payload, _ := json.Marshal(store.UserMessage{Text: fmt.Sprintf("[message from the parent thread %s]\n%s", th.ID, a.Message)})
		if _, err := tx.Enqueue(store.InboxItem{ThreadID: t.ID, Kind: store.KindNote, Payload: payload,
			DedupKey: "child-message:" + th.ID + ":" + c.ID}); err != nil {
			return res, false, err
		}
		fx.wake = append(fx.wake, t.ID)
		return done(fmt.Sprintf("Message sent to child thread %s.", t.ID))

	case BuiltinCancelSubscription:
		var a struct {
			ToolCallID string `json:"tool_call_id"`
		}
		if err := decodeStrict(c.Arguments, &a); err != nil {
			return fail("arguments are not {\"tool_call_id\": string}: %v", err)
		}
		sub, err := tx.Subscription(th.ID, a.ToolCallID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && sub.State != store.SubscriptionActive) {
			// RAP SU-7: only an active subscription of this thread.
			return fail("%q is not an active subscription of this thread; active ones: %s", a.ToolCallID, activeSubs(tx, th.ID))
		}
		if err != nil {
			return res, false, err
		}
		sub.State = store.SubscriptionCancelled
		if err := tx.PutSubscription(sub); err != nil {
			return res, false, err
		}
		fx.notices = append(fx.notices, notice{path: rap.CancelToolCallPath, body: rap.CancelToolCallRequest{ThreadID: th.ID, ToolCallID: sub.CallID}})
		return done(fmt.Sprintf("Subscription %s (%s) is cancelled; no more events will arrive from it.", sub.CallID, sub.ToolName))
	}
	return fail("is not a built-in tool")
}

func activeSubs(tx store.Tx, threadID string) string {
	subs, err := tx.ThreadSubscriptions(threadID)
	if err != nil {
		return "(unknown)"
	}
	var ids []string
	for _, s := range subs {
		if s.State == store.SubscriptionActive {
			ids = append(ids, s.CallID+" ("+s.ToolName+")")
		}
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Sleep timers.

// sleepDue works out when a sleep or sleep_until call wakes. msg is an
// error message for the model when the arguments are unusable.
func sleepDue(name string, args json.RawMessage, now time.Time) (due time.Time, what, msg string) {
	if name == BuiltinSleep {
		var a struct {
			Seconds *float64 `json:"seconds"`
			Reason  string   `json:"reason"`
		}
		if err := decodeStrict(args, &a); err != nil || a.Seconds == nil {
			return due, "", fmt.Sprintf("arguments are not {\"seconds\": number}: %v", errOr(err, "seconds is missing"))
		}
		s := *a.Seconds
		if math.IsNaN(s) || s < 0 || s > MaxSleep.Seconds() {
			return due, "", fmt.Sprintf("seconds is %v; give 0 to %.0f", s, MaxSleep.Seconds())
		}
		d := time.Duration(s * float64(time.Second))
		return now.Add(d), fmt.Sprintf("sleeping %v", d), ""
	}
	var a struct {
		Date     string `json:"date"`
		Time     string `json:"time"`
		Timezone string `json:"timezone"`
	}
	if err := decodeStrict(args, &a); err != nil {
		return due, "", fmt.Sprintf("arguments are not {\"date\": \"YYYY-MM-DD\", \"time\": \"HH:MM\", \"timezone\"?: string}: %v", err)
	}
	tz := a.Timezone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return due, "", fmt.Sprintf("timezone %q is not an IANA time zone name such as Europe/Paris or UTC", tz)
	}
	var t time.Time
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err = time.ParseInLocation(layout, a.Date+" "+a.Time, loc); err == nil {
			break
		}
	}
	if err != nil {
		return due, "", fmt.Sprintf("date %q and time %q do not read as YYYY-MM-DD and HH:MM or HH:MM:SS", a.Date, a.Time)
	}
	if t.After(now.Add(MaxSleep)) {
		return due, "", fmt.Sprintf("%s is more than %v ahead", t.Format(time.RFC3339), MaxSleep)
	}
	if t.Before(now) {
		t = now // a past time wakes at once (RAP BT-1)
	}
	return t, "sleeping until " + a.Date + " " + a.Time + " " + tz, ""
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}
