package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// statusToolServer is a tiny RAP tool server over real HTTP that accepts
// every invocation and answers POST /tool_call_status with answer, as a
// tool server implementing it would (see COMMON.md: 200 with a
// ToolCallStatus for a known call, 404 with status "unknown" otherwise).
type statusToolServer struct {
	t       testing.TB
	srv     *httptest.Server
	tools   []rap.Tool
	invoked chan rap.Invocation

	mu     sync.Mutex
	answer func(req rap.ToolCallStatusRequest) (code int, body string)
	asks   []rap.ToolCallStatusRequest
}

func newStatusToolServer(t testing.TB, answer func(rap.ToolCallStatusRequest) (int, string), tools ...rap.Tool) *statusToolServer {
	s := &statusToolServer{t: t, tools: tools, answer: answer, invoked: make(chan rap.Invocation, 100)}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

// knows answers as a server that knows the call.
func knows(req rap.ToolCallStatusRequest) (int, string) {
	b, _ := json.Marshal(rap.ToolCallStatus{ToolCallID: req.ToolCallID, Status: rap.CallRunning})
	return http.StatusOK, string(b)
}

// forgot answers as a server that does not know the call.
func forgot(req rap.ToolCallStatusRequest) (int, string) {
	b, _ := json.Marshal(rap.ToolCallStatus{ToolCallID: req.ToolCallID, Status: rap.CallUnknown})
	return http.StatusNotFound, string(b)
}

func (s *statusToolServer) setAnswer(f func(rap.ToolCallStatusRequest) (int, string)) {
	s.mu.Lock()
	s.answer = f
	s.mu.Unlock()
}

func (s *statusToolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == rap.WellKnownPath:
		b, _ := json.Marshal(rap.Toolset{Name: "lossy", Endpoint: s.srv.URL + "/invoke", Tools: s.tools})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case r.Method == http.MethodPost && r.URL.Path == "/invoke":
		inv, err := rap.DecodeInvocation(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.invoked <- *inv
	case r.Method == http.MethodPost && r.URL.Path == rap.ToolCallStatusPath:
		req, err := rap.DecodeToolCallStatus(body)
		if err != nil {
			s.t.Errorf("bad tool_call_status body %s: %v", body, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.asks = append(s.asks, *req)
		answer := s.answer
		s.mu.Unlock()
		code, b := answer(*req)
		if strings.HasPrefix(b, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		io.WriteString(w, b)
	default:
		http.NotFound(w, r) // close_thread, cancel_tool_call: not needed here
	}
}

func (s *statusToolServer) asked() []rap.ToolCallStatusRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rap.ToolCallStatusRequest(nil), s.asks...)
}

func (s *statusToolServer) next() rap.Invocation {
	s.t.Helper()
	select {
	case inv := <-s.invoked:
		return inv
	case <-time.After(waitFor):
		s.t.Fatal("no invocation arrived")
		return rap.Invocation{}
	}
}

// statusEnv starts a runtime whose calls are asked about after a short
// silence, with a thread whose model called "job" on srv.
func statusEnv(t *testing.T, srv *statusToolServer, after time.Duration, turns ...scripted.Turn) (*env, string, rap.Invocation) {
	t.Helper()
	if len(turns) == 0 {
		turns = []scripted.Turn{
			{ToolCalls: []scripted.Call{call("job", `{}`)}},
			{Text: "got {{last_result}}", Repeat: true},
		}
	}
	e := newEnv(t, envOptions{servers: []string{srv.srv.URL}, turns: turns,
		tweak: func(c *Config) { c.CallStatusAfter = after }})
	th := e.newThread()
	e.post(th, "start the job")
	return e, th, srv.next()
}

// waitDispatched waits until the tool's acceptance of the call is recorded.
func waitDispatched(t *testing.T, e *env, th, callID string) {
	t.Helper()
	poll(t, "the call to be dispatched", func() bool {
		st, err := callState(e, th, callID)
		return err == nil && st == store.CallDispatched
	})
}

// callCheck reads the scheduled check of a call.
func callCheck(e *env, thread, callID string) (store.CallCheck, bool) {
	var found store.CallCheck
	ok := false
	err := e.st.View(context.Background(), func(tx store.Tx) error {
		due, err := tx.DueCallChecks(time.Now().Add(1000*time.Hour), 1000)
		for _, c := range due {
			if c.ThreadID == thread && c.CallID == callID {
				found, ok = c, true
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return found, ok
}

// A call pending past the silence is asked about; a tool
// server that answers 404 with {"status":"unknown"} lost it, and the call
// ends with an "Error: " result that tells the model it may retry
// (RAP RE-4). The model runs on it once.
func TestCallStatusDeadCallGetsErrorResult(t *testing.T) {
	srv := newStatusToolServer(t, forgot, tool("job"))
	e, th, inv := statusEnv(t, srv, 20*time.Millisecond)
	h := e.waitHistory(th, "the lost call's error result", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "got Error:")
	})
	rs := results(h)
	if len(rs) != 1 || rs[0].CallID != inv.ID || !rs[0].IsError || !strings.HasPrefix(rs[0].Text, "Error: ") ||
		!strings.Contains(rs[0].Text, "lost this call") || !strings.Contains(rs[0].Text, "again") {
		t.Fatalf("results = %+v, want one Error: result saying the tool lost the call and it may be retried", rs)
	}
	asks := srv.asked()
	if len(asks) == 0 || asks[0].ThreadID != th || asks[0].ToolCallID != inv.ID {
		t.Fatalf("status requests = %+v, want {thread_id %s, tool_call_id %s}", asks, th, inv.ID)
	}
	if st, _ := callState(e, th, inv.ID); st != store.CallDone {
		t.Fatalf("call state %q, want done", st)
	}
	// The late real result, if the tool found it after all, adds nothing.
	if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "late"}); status != http.StatusOK || !strings.Contains(body, "duplicate") {
		t.Fatalf("late result: %d %s", status, body)
	}
	poll(t, "the check to be removed", func() bool { _, ok := callCheck(e, th, inv.ID); return !ok })
}

// A tool server without the endpoint (a plain 404) is
// remembered and not asked again by this process, for this call or any
// other; the calls stay pending and no result is made up.
func TestCallStatusUnsupportedAskedOnce(t *testing.T) {
	srv := newStatusToolServer(t, func(rap.ToolCallStatusRequest) (int, string) {
		return http.StatusNotFound, "404 page not found\n"
	}, tool("job"))
	e, th, inv := statusEnv(t, srv, 20*time.Millisecond, scripted.Turn{ToolCalls: []scripted.Call{call("job", `{}`)}, Repeat: true})
	farAway := func(callID string) func() bool {
		return func() bool {
			c, ok := callCheck(e, th, callID)
			return ok && time.Until(c.Due) > time.Hour
		}
	}
	poll(t, "the check to be put off after the 404", farAway(inv.ID))
	if n := len(srv.asked()); n != 1 {
		t.Fatalf("%d status requests, want 1", n)
	}
	// A second call to the same server is not asked about at all.
	e.post(th, "another one")
	inv2 := srv.next()
	poll(t, "the second call's check to be put off without asking", farAway(inv2.ID))
	if n := len(srv.asked()); n != 1 {
		t.Fatalf("%d status requests after a second call, want still 1", n)
	}
	for _, id := range []string{inv2.ID} {
		if st, _ := callState(e, th, id); st != store.CallDispatched {
			t.Fatalf("call %s is %q, want still dispatched", id, st)
		}
	}
	if rs := results(e.history(th)); len(rs) != 1 || rs[0].CallID != inv.ID || !strings.HasPrefix(rs[0].Text, "Interrupted") {
		t.Fatalf("results = %+v, want only the first call's interruption by the new message", rs)
	}
}

// 5xx answers say nothing about the call: it keeps
// waiting and is asked again later with backoff; its real result then
// reaches the model exactly once.
func TestCallStatus5xxKeepsWaiting(t *testing.T) {
	srv := newStatusToolServer(t, func(rap.ToolCallStatusRequest) (int, string) {
		return http.StatusServiceUnavailable, "busy"
	}, tool("job"))
	e, th, inv := statusEnv(t, srv, 10*time.Millisecond)
	poll(t, "three status requests", func() bool { return len(srv.asked()) >= 3 })
	c, ok := callCheck(e, th, inv.ID)
	if !ok || c.Failures < 2 {
		t.Fatalf("check = %+v (found %v), want failures counted for backoff", c, ok)
	}
	if st, _ := callState(e, th, inv.ID); st != store.CallDispatched {
		t.Fatalf("call is %q after 5xx status answers, want still dispatched", st)
	}
	if rs := results(e.history(th)); len(rs) != 0 {
		t.Fatalf("results = %+v, want none", rs)
	}
	// A server that knows the call again resets the backoff.
	srv.setAnswer(knows)
	poll(t, "the backoff to be reset by a 200", func() bool { c, ok := callCheck(e, th, inv.ID); return ok && c.Failures == 0 })
	reply(t, inv, "the real result")
	h := e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got the real result") })
	if rs := results(h); len(rs) != 1 || rs[0].IsError {
		t.Fatalf("results = %+v, want the real one only", rs)
	}
}

// A call pending when the runtime starts is asked about
// once at start, even long before its silence is over.
func TestCallStatusAskedOnceAfterRestart(t *testing.T) {
	srv := newStatusToolServer(t, knows, tool("job"))
	e, th, inv := statusEnv(t, srv, time.Hour)
	waitDispatched(t, e, th, inv.ID)
	if n := len(srv.asked()); n != 0 {
		t.Fatalf("%d status requests before the silence, want 0", n)
	}
	e.restart()
	poll(t, "the status request after restart", func() bool { return len(srv.asked()) == 1 })
	poll(t, "the check to be rescheduled an hour on", func() bool {
		c, ok := callCheck(e, th, inv.ID)
		return ok && time.Until(c.Due) > 30*time.Minute
	})
	if n := len(srv.asked()); n != 1 {
		t.Fatalf("%d status requests, want 1", n)
	}
	if st, _ := callState(e, th, inv.ID); st != store.CallDispatched {
		t.Fatalf("call is %q, want still dispatched", st)
	}
}

// An active subscription its tool no longer knows is
// ended and the model is told no more events will come.
func TestCallStatusLostSubscriptionEnds(t *testing.T) {
	srv := newStatusToolServer(t, knows, tool("job"))
	e, th, inv := statusEnv(t, srv, 10*time.Millisecond, scripted.Turn{ToolCalls: []scripted.Call{call("job", `{}`)}},
		scripted.Turn{When: &scripted.When{UserContains: "has ended"}, Text: "the watch stopped"},
		scripted.Turn{Text: "watching", Repeat: true})
	status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "watching", Subscription: true})
	if status != http.StatusOK {
		t.Fatalf("subscription result: %d %s", status, body)
	}
	e.waitHistory(th, "the subscription confirmed", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "watching") })
	n := len(srv.asked())
	poll(t, "the subscription to be asked about", func() bool { return len(srv.asked()) > n })
	srv.setAnswer(forgot)
	e.waitHistory(th, "the model told", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "the watch stopped") })
	var sub store.Subscription
	err := e.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		sub, err = tx.Subscription(th, inv.ID)
		return err
	})
	if err != nil || sub.State != store.SubscriptionCancelled {
		t.Fatalf("subscription %+v, %v; want cancelled", sub, err)
	}
	// Later events for it are discarded.
	status, body = callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "tick"})
	if status == http.StatusOK && !strings.Contains(body, "ignored") {
		t.Fatalf("event after the end: %d %s", status, body)
	}
}

// A call waiting for the user (a user_choice the user has
// not answered) is asked about too; when its tool lost it, it ends with
// the Error: result and the choice is no longer offered.
func TestCallStatusLostCallWaitingForUser(t *testing.T) {
	srv := newStatusToolServer(t, knows, tool("job"))
	e, th, inv := statusEnv(t, srv, 10*time.Millisecond)
	status, body := callback(t, inv.CallbackURL, rap.UserChoice{GroupID: th, ID: inv.ID, Prompt: "Deploy where?",
		Choices: []string{"staging", "production"}, ResponseURL: srv.srv.URL + "/choice"})
	if status != http.StatusOK {
		t.Fatalf("user_choice: %d %s", status, body)
	}
	poll(t, "the choice to be offered", func() bool {
		cs, err := e.rt.PendingChoices(context.Background(), th)
		return err == nil && len(cs) == 1
	})
	n := len(srv.asked())
	poll(t, "the waiting call to be asked about", func() bool { return len(srv.asked()) > n })
	srv.setAnswer(forgot)
	h := e.waitHistory(th, "the lost call's error result", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "got Error:")
	})
	if rs := results(h); len(rs) != 1 || !strings.Contains(rs[0].Text, "lost this call") {
		t.Fatalf("results = %+v", rs)
	}
	if cs, err := e.rt.PendingChoices(context.Background(), th); err != nil || len(cs) != 0 {
		t.Fatalf("choices still offered after the call ended: %+v, %v", cs, err)
	}
}

// BenchmarkCallStatusSweep measures the sweep: "idle" is one wake with
// 10,000 checks scheduled in the future (what the runtime pays while no
// call has been silent for long); "settle" is the cost per check of
// settling checks whose calls ended (most checks end that way).
func BenchmarkCallStatusSweep(b *testing.B) {
	e := newEnv(b, envOptions{tweak: func(c *Config) { c.CallStatusAfter = time.Hour }})
	th := e.newThread()
	const n = 10000
	put := func(prefix string, due time.Time, state store.CallState) {
		err := e.st.Update(context.Background(), func(tx store.Tx) error {
			var cs []store.Call
			for i := range n {
				cs = append(cs, store.Call{ThreadID: th, CallID: prefix + strconv.Itoa(i), ToolName: "x", Arguments: json.RawMessage(`{}`),
					Toolset: "ts", Endpoint: "http://127.0.0.1:1/", State: state})
			}
			if err := tx.PutCalls(cs); err != nil {
				return err
			}
			for _, c := range cs {
				if err := tx.PutCallCheck(store.CallCheck{ThreadID: th, CallID: c.CallID, Due: due}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	put("future", time.Now().Add(time.Hour), store.CallDispatched)
	b.Run("idle", func(b *testing.B) {
		for b.Loop() {
			err := e.st.View(context.Background(), func(tx store.Tx) error {
				if due, err := tx.DueCallChecks(time.Now(), callStatusBatch); err != nil || len(due) != 0 {
					return fmt.Errorf("due %d, %v", len(due), err)
				}
				_, _, err := tx.NextCallCheck()
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	round := 0
	b.Run("settle", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			round++
			put(fmt.Sprintf("ended%d-", round), time.Now().Add(-time.Hour), store.CallDone)
			b.StartTimer()
			for {
				var due []store.CallCheck
				err := e.st.View(context.Background(), func(tx store.Tx) error {
					var err error
					due, err = tx.DueCallChecks(time.Now(), callStatusBatch)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				if len(due) == 0 {
					break
				}
				e.rt.checkCalls(context.Background(), due)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n)/1000, "µs/check")
	})
}
