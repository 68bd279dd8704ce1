package mcp

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// shortDefaultCallTimeout makes a zero Options.CallTimeout mean d for the
// rest of the test.
func shortDefaultCallTimeout(t *testing.T, d time.Duration) {
	old := defaultCallTimeout
	defaultCallTimeout = d
	t.Cleanup(func() { defaultCallTimeout = old })
}

// A synchronous tools/call that the MCP server never answers is ended by
// the default call timeout, with nothing configured: the request is
// cancelled at the server (notifications/cancelled) and the call gets
// exactly one Error: result saying what to do.
func TestSyncCallEndedByDefaultTimeout(t *testing.T) {
	shortDefaultCallTimeout(t, 300*time.Millisecond)
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "block", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Error: ", `did not answer tools/call for "block" within 300ms`, "call_timeout"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("result %q lacks %q", res.Text, want)
		}
	}
	waitFor(t, "the MCP server to see the cancellation", func() bool { return slices.Contains(f.hooks.cancelledTools(), "block") })
	// The server is free again: nothing of the cancelled request can
	// still come back as a second result.
	if results, _ := countResults(c); results != 1 {
		t.Errorf("%d results, want exactly 1", results)
	}
	if errs := f.rt.Errors(); len(errs) > 0 {
		t.Errorf("the runtime saw protocol errors: %v", errs)
	}
}

// Options.CallTimeout overrides the default; a call that answers in
// time is not touched by it.
func TestSyncCallTimeoutOption(t *testing.T) {
	f := startHTTP(t, func(o *Options) { o.CallTimeout = 250 * time.Millisecond })
	if res := f.call(t, "echo", map[string]any{"text": "hi"}); strings.HasPrefix(res.Text, "Error: ") {
		t.Fatalf("a quick call failed: %q", res.Text)
	}
	res := f.call(t, "block", map[string]any{})
	if !strings.Contains(res.Text, "within 250ms") {
		t.Errorf("result = %q", res.Text)
	}
}

// A call the server runs as an MCP task is not bounded by the call
// timeout: it keeps waiting for the task (within TaskTimeout) and ends
// with the task's result.
func TestTaskCallNotBoundedByCallTimeout(t *testing.T) {
	shortDefaultCallTimeout(t, 100*time.Millisecond)
	f, _ := startTasks(t, nil)
	res := f.call(t, "slow", map[string]any{"ms": 600})
	if res.ModelText() != "result of slow" {
		t.Fatalf("result = %q", res.ModelText())
	}
}
