package runtime

// This file owns the after-commit effects: what a transaction did that must
// be acted on once it committed (threads to wake, client events to publish,
// notifications to every tool server, timers to re-arm), collected in an
// effects value inside the transaction and run by apply.

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// effects collects what a transaction did that must be acted on outside it,
// once it committed. A Store.Update function may run more than once, so
// it is reset at the start of each run.
type effects struct {
	wake    []string        // threads with new inbox rows
	notices []notice        // /close_thread and /cancel_tool_call POSTs
	events  []Event         // client events to publish
	calls   []store.Call    // built-in calls left pending (sleep)
	timers  bool            // a timer was written
	stop    bool            // the slice must not loop back
	closed  map[string]bool // threads closed by this transaction
	// announced says the commit stored the client events of what it
	// saved (commitRelease): they are not to be published again.
	announced bool
}

// notice is one best-effort notification to every tool server.
type notice struct {
	path string
	body any
}

func (fx *effects) event(threadID, typ string, data any) {
	b, _ := json.Marshal(data)
	fx.events = append(fx.events, Event{Type: typ, ThreadID: threadID, Data: b})
}

// apply acts on the effects of a committed transaction.
func (r *Runtime) apply(fx *effects) {
	if fx == nil {
		return
	}
	for _, e := range fx.events {
		r.hub.publish(e)
	}
	for _, n := range fx.notices {
		r.notifyServers(n.path, n.body)
	}
	if fx.timers {
		r.kickTimer()
	}
	for _, id := range fx.wake {
		r.wake(id)
	}
}

// goTracked runs fn in a goroutine that Shutdown waits for, unless the
// runtime is stopping (then it reports false and fn does not run).
func (r *Runtime) goTracked(fn func()) bool {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return false
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		fn()
	}()
	return true
}

// notifyTimeout bounds one /close_thread or /cancel_tool_call POST.
const notifyTimeout = 10 * time.Second

// notifyServers POSTs body to path under every configured tool server,
// concurrently, once each, without blocking the caller (RAP TC-1, CA-1).
// Failures are logged; one does not stop the others.
func (r *Runtime) notifyServers(path string, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		r.log.Error("encode tool server notification", "path", path, "err", err)
		return
	}
	for _, base := range r.cfg.ToolServers {
		ok := r.goTracked(func() {
			url := strings.TrimRight(base, "/") + path
			status, _, err := r.postOnce(r.baseCtx, url, b, notifyTimeout)
			r.log.Info("rap notification", "audit", true, "path", path, "server", redact(base), "status", status, "error", errString(err))
		})
		if !ok {
			return
		}
	}
}
