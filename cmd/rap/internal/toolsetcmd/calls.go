package toolsetcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
)

// Calls in flight on a toolset_command program that dies. A RAP program
// acknowledges an invocation at once and posts the result later to the
// runtime's callback URL; when the program dies in between, nothing would
// ever post it and the call would stay pending. The proxy therefore notes
// every invocation the program acknowledged, and when the program exits the
// supervisor posts an "Error: ..." result for each of them. Results the
// program did post first make these duplicates, which the runtime ignores
// (RAP RE-6); a call cancelled in the meantime ignores it too (CA-2).

// maxTrackedCalls bounds the invocations remembered per program; past it
// the oldest are forgotten (their calls then rely on the runtime's
// tool_call_status sweep).
const maxTrackedCalls = 10000

// callResultTimeout bounds posting one error result.
const callResultTimeout = 10 * time.Second

// maxTrackedInvocationBytes bounds the invocation bodies the proxy reads
// to note the call; larger ones are forwarded untracked.
const maxTrackedInvocationBytes = 8 << 20

// trackedCall is what an error result needs of an invocation.
type trackedCall struct {
	GroupID     string `json:"group_id"`
	ID          string `json:"id"`
	CallID      string `json:"call_id"`
	CallbackURL string `json:"callback_url"`
}

// callTracker remembers the invocations a program acknowledged.
type callTracker struct {
	mu    sync.Mutex
	calls map[string]trackedCall // by callback URL
	order []string
}

func (t *callTracker) add(c trackedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = map[string]trackedCall{}
	}
	if _, ok := t.calls[c.CallbackURL]; ok {
		return
	}
	for len(t.calls) >= maxTrackedCalls && len(t.order) > 0 {
		delete(t.calls, t.order[0])
		t.order = t.order[1:]
	}
	t.calls[c.CallbackURL] = c
	t.order = append(t.order, c.CallbackURL)
}

// take returns and forgets every remembered call.
func (t *callTracker) take() []trackedCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]trackedCall, 0, len(t.calls))
	for _, k := range t.order {
		if c, ok := t.calls[k]; ok {
			out = append(out, c)
		}
	}
	t.calls, t.order = nil, nil
	return out
}

type trackedCallKey struct{}

// noteInvocation reads an invocation POSTed through the proxy and puts it
// in the request's context, for trackAcknowledged; the body is restored.
func noteInvocation(r *http.Request) *http.Request {
	if r.Method != http.MethodPost || r.Body == nil || r.ContentLength > maxTrackedInvocationBytes {
		return r
	}
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, maxTrackedInvocationBytes+1))
	// What was read goes first, then whatever is left of a longer body.
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), orig), orig}
	if err != nil || len(body) > maxTrackedInvocationBytes {
		return r
	}
	var c trackedCall
	if json.Unmarshal(body, &c) != nil || c.ID == "" || c.GroupID == "" || c.CallbackURL == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), trackedCallKey{}, c))
}

// trackAcknowledged remembers the invocation of resp's request when the
// program acknowledged it.
func (s *Supervisor) trackAcknowledged(resp *http.Response) {
	c, ok := resp.Request.Context().Value(trackedCallKey{}).(trackedCall)
	if ok && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		s.calls.add(c)
	}
}

// failCalls posts an error result for each call the program that exited
// with status had in flight.
func (s *Supervisor) failCalls(calls []trackedCall, status string) {
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			res := rap.ToolResult{GroupID: c.GroupID, ID: c.ID, CallID: c.CallID,
				Text: fmt.Sprintf("Error: the tool server %q stopped (%s) while this call was running, so it has no result; rap serve is restarting it. Call the tool again in a moment.", s.name, status)}
			body, err := json.Marshal(res)
			if err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), callResultTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.CallbackURL, bytes.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				s.log.Warn("toolset_command: could not post the error result of a call in flight", "id", c.ID, "err", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	if len(calls) > 0 {
		s.log.Warn("toolset_command: calls in flight ended with an error result", "calls", len(calls))
	}
}
