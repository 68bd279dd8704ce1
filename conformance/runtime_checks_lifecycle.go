package conformance

import (
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// The runtime checks of cancellation, closure, timeouts and migration.
var (
	checkRuntimeCancelNotice = Check{
		ID: "runtime.cancel.notice", Level: Must, Rule: "RAP CA-1",
		Title: "an interrupted call is cancelled with /cancel_tool_call",
		Fix:   "when a pending call is interrupted, POST {thread_id, tool_call_id} to {base}/cancel_tool_call of every tool server",
	}
	checkRuntimeCancelLate = Check{
		ID: "runtime.cancel.late-result", Level: Must, Rule: "RAP CA-2",
		Title: "a result of a cancelled call is ignored",
		Fix:   "answer a result of a cancelled call without injecting it (the call already has its interrupted result)",
	}
	checkRuntimeCloseNotice = Check{
		ID: "runtime.close.notice", Level: Must, Rule: "RAP TC-1",
		Title: "closing a thread sends /close_thread",
		Fix:   "when a thread closes, POST {thread_id} to {base}/close_thread of every tool server, once, without waiting",
	}
	checkRuntimeTimeout = Check{
		ID: "runtime.timeout.result", Level: Should, Rule: "RAP RT-5",
		Title: "a per-tool timeout ends a silent call with an error result",
		Fix:   "when a call's timeout passes, record a synthetic error tool result the model sees",
	}
	checkRuntimeMigrate = Check{
		ID: "runtime.migrate.notice", Level: Must, Rule: "RAP MI-1, MI-2",
		Title: "moving a session calls /migrate of a toolset that needs migration",
		Fix:   "during a migration, POST {session_id, destination_url} to {base}/migrate of each toolset with needsMigration and wait for its 200",
	}
)

func (r *runtimeRun) addLifecycleChecks(s *Suite) {
	s.Add(checkRuntimeCancelNotice, func(t *T) {
		c := r.call(t, "cancel", WaitTool, false)
		r.awaitDispatched(t, c)
		from := r.kit.mark()
		if err := r.d.say(t.Context(), c.conv, "[interrupt] Stop waiting for that call; no need to call anything."); err != nil {
			t.Failf("could not send the interrupting message: %v", err)
		}
		rec, err := r.kit.await(t.Context(), from, func(rec Received) bool {
			return rec.Kind == "cancel" && rec.Fields["tool_call_id"] == c.inv.ID
		})
		if err != nil {
			t.Failf("no /cancel_tool_call for call %q came after a message interrupted it", c.inv.ID)
		}
		t.Record(rec.Exchange)
		r.cancel = c
		if rec.Fields["thread_id"] != c.inv.GroupID {
			t.Failf("/cancel_tool_call's thread_id is %v, want the call's group_id %q", rec.Fields["thread_id"], c.inv.GroupID)
		}
	})
	s.Add(checkRuntimeCancelLate, func(t *T) {
		t.Requires(checkRuntimeCancelNotice.ID)
		c := r.cancel
		text := "late result " + r.nonce
		status, answer := send(t, c.inv.CallbackURL, c.result(text))
		if status >= 500 {
			t.Failf("a result of a cancelled call was answered %d (%.200s): the tool would retry it", status, answer)
		}
		n, ok := r.settledCount(t, c.conv, text)
		if !ok {
			t.Skipf("answered %d; whether it was injected cannot be seen without the /v1 API", status)
		}
		if n > 0 {
			t.Failf("the result of a cancelled call was injected into the conversation")
		}
	})
	s.Add(checkRuntimeCloseNotice, func(t *T) {
		t.Requires(checkRuntimeInvocationFields.ID)
		c := r.fields
		from := r.kit.mark()
		if err := r.d.close(t.Context(), c.conv); err != nil {
			t.Failf("could not close the conversation: %v", err)
		}
		rec, err := r.kit.await(t.Context(), from, func(rec Received) bool {
			return rec.Kind == "close" && rec.Fields["thread_id"] == c.inv.GroupID
		})
		if err != nil {
			t.Failf("no /close_thread with thread_id %q came after its conversation was closed", c.inv.GroupID)
		}
		t.Record(rec.Exchange)
	})
	s.Add(checkRuntimeTimeout, func(t *T) {
		r.ready(t)
		if _, err := r.d.history(t.Context(), ""); err == errNoAPI {
			t.Skipf("%v", errNoAPI)
		}
		c := r.call(t, "timeout", WaitTool, false)
		var deadline time.Time
		for deadline.IsZero() {
			th, err := r.d.thread(t.Context(), c.conv)
			if err != nil {
				t.Failf("reading the thread: %v", err)
			}
			state := api.CallState("")
			for _, p := range th.PendingCalls {
				if p.CallID == c.inv.ID {
					deadline, state = p.Deadline, p.State
				}
			}
			switch {
			case !deadline.IsZero():
			case state == "" && hasErrorResult(mustHistory(t, r, c.conv), c.inv.ID):
				return // timed out already
			case state == api.CallDispatched:
				t.Skipf("the runtime has no timeout for %s (for gorap: rap serve --tool-timeout 10s)", WaitTool)
			default: // not yet recorded as sent: look again
				waitFor(t, 50*time.Millisecond)
			}
		}
		t.Logf("the call's deadline is %s", deadline.Format(time.RFC3339))
		msgs, ok, _ := r.waitHistory(t.Context(), c.conv, func(m []api.Message) bool { return hasErrorResult(m, c.inv.ID) })
		if !ok {
			t.Failf("no error result came for the silent call (deadline %s); results seen: %q", deadline.Format(time.RFC3339), resultTexts(msgs))
		}
	})
}

func (r *runtimeRun) addMigrateCheck(s *Suite) {
	s.Add(checkRuntimeMigrate, func(t *T) {
		if r.cfg.MigrateTo == "" {
			t.Skipf("no second runtime to move a session to (--migrate-to URL)")
		}
		c := r.call(t, "migrate", EchoTool, false)
		c.sendOK(t, c.result("before the move "+r.nonce))
		if err := r.d.settle(t.Context(), c.conv); err != nil {
			t.Failf("the conversation did not settle: %v", err)
		}
		from := r.kit.mark()
		if err := r.d.move(t.Context(), c.conv, r.cfg.MigrateTo, r.cfg.MigrateToken); err != nil {
			t.Failf("moving the session to %s failed: %v", r.cfg.MigrateTo, err)
		}
		rec, err := r.kit.await(t.Context(), from, func(rec Received) bool { return rec.Kind == "migrate" })
		if err != nil {
			t.Failf("the session moved without a /migrate to the toolset, which has needsMigration: true")
		}
		t.Record(rec.Exchange)
		if sid, _ := rec.Fields["session_id"].(string); r.cfg.API != "" && sid != c.conv {
			t.Failf("/migrate's session_id is %q, want the root thread %q", sid, c.conv)
		}
		if dst, _ := rec.Fields["destination_url"].(string); strings.TrimSpace(dst) == "" {
			t.Failf("/migrate has no destination_url")
		}
	})
}

func mustHistory(t *T, r *runtimeRun, conv string) []api.Message {
	msgs, err := r.d.history(t.Context(), conv)
	if err != nil {
		t.Failf("reading the conversation: %v", err)
	}
	return msgs
}

// awaitDispatched waits, where the conversation can be read, until the
// runtime has recorded that the tool accepted the call: a message that
// comes earlier may find the call not yet sent, with nothing to interrupt.
func (r *runtimeRun) awaitDispatched(t *T, c *stepCall) {
	ctx, cancel := nearDeadline(t.Context())
	defer cancel()
	for {
		th, err := r.d.thread(ctx, c.conv)
		if err == errNoAPI {
			return
		}
		if err == nil {
			for _, p := range th.PendingCalls {
				if p.CallID == c.inv.ID && p.State == api.CallDispatched {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Failf("the runtime never recorded the call %q as accepted by the tool", c.inv.ID)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitFor pauses the check for d, or until its time is up.
func waitFor(t *T, d time.Duration) {
	select {
	case <-t.Context().Done():
	case <-time.After(d):
	}
}
