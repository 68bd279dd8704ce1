package runtime

// This file owns the built-ins that make a thread wait (RAP BT-1): sleep
// and sleep_until, which leave a pending call and a durable timer (fired in
// timers.go), and sleep_until_event_or_input, which ends the slice.

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// execSleep runs sleep and sleep_until (RAP BT-1): a durable timer row
// whose firing delivers the result (timers.go); the call stays pending
// until then.
func (r *Runtime) execSleep(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (store.ToolResult, bool, error) {
	res, fail, _ := builtinReply(c)
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
}

// execSleepUntilEventOrInput runs sleep_until_event_or_input (RAP BT-1):
// it ends the slice; the next user message or subscription event wakes
// the thread.
func (r *Runtime) execSleepUntilEventOrInput(tx store.Tx, th store.Thread, c store.ToolCall, fx *effects) (store.ToolResult, bool, error) {
	_, fail, done := builtinReply(c)
	var a struct{}
	if err := decodeStrict(c.Arguments, &a); err != nil {
		return fail("takes no arguments (%v); call it with {}", err)
	}
	fx.stop = true
	return done("Waiting for the next user message or subscription event.")
}

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
