package mcp

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// server-everything advertises tasks for tools/call and
// runs simulate-research-query only as a task (taskSupport "required").
// Through the bridge it is called with task augmentation, polled with
// tasks/get, its status messages arrive as progress view updates before
// the result, and tasks/result becomes the one RAP result.
func TestEverythingTaskTool(t *testing.T) {
	node, script := everythingServer(t)
	f := startStdio(t, func(o *Options) {
		o.Name = "everything"
		o.Command = []string{node, script, "stdio"}
		o.Env = nil
		o.Stderr = devNull(t)
		o.TerminateWait = 300 * time.Millisecond
	})
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "simulate-research-query", map[string]any{"topic": "tides"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.ModelText(), "# Research Report: tides") {
		t.Fatalf("result = %.300q", res.ModelText())
	}
	var msgs []string
	results := 0
	for _, m := range c.Messages() {
		switch v := m.(type) {
		case *rap.ViewUpdate:
			if v.ViewType == ProgressViewType {
				msgs = append(msgs, string(v.Content))
			}
		case *rap.ToolResult:
			results++
		}
		if results > 0 {
			if _, ok := m.(*rap.ViewUpdate); ok {
				t.Errorf("a view update after the result")
			}
		}
	}
	if results != 1 {
		t.Errorf("%d results, want 1", results)
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"Gathering sources", "Generating report"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no progress view update with %q; got:\n%s", want, joined)
		}
	}
}

// An ambiguous research query makes the task
// input_required; the bridge then calls tasks/result, through which the
// server's elicitation arrives, becomes a RAP user_choice, and the
// selection reaches the task, whose result names it.
func TestEverythingTaskInputRequired(t *testing.T) {
	node, script := everythingServer(t)
	f := startStdio(t, func(o *Options) {
		o.Name = "everything"
		o.Command = []string{node, script, "stdio"}
		o.Env = nil
		o.Stderr = devNull(t)
		o.TerminateWait = 300 * time.Millisecond
	})
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "simulate-research-query", map[string]any{"topic": "python", "ambiguous": true})
	if err != nil {
		t.Fatal(err)
	}
	uc := nextChoice(t, ctx, c, 0)
	i := slices.Index(uc.Choices, "Monty Python comedy group")
	if i < 0 {
		t.Fatalf("user_choice = %+v", uc)
	}
	if err := f.rt.Choose(ctx, uc, i); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.ModelText(), "Clarification**: comedy") {
		t.Fatalf("result = %.400q", res.ModelText())
	}
}

// Over Streamable HTTP: the bridge POSTs its task
// requests in the SDK's session (taskhttp.go), and server-everything's
// task tool runs as a task to its one result.
func TestEverythingTaskToolHTTP(t *testing.T) {
	node, script := everythingServer(t)
	port := startEverythingHTTP(t, node, script)
	f := startBridge(t, &Options{Name: "everything", URL: "http://127.0.0.1:" + port + "/mcp", Logger: quietLogger()})
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "simulate-research-query", map[string]any{"topic": "tides"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.ModelText(), "# Research Report: tides") {
		t.Fatalf("result = %.300q", res.ModelText())
	}
	if results, views := countResults(c); results != 1 || views == 0 {
		t.Errorf("%d results and %d progress view updates, want 1 and some", results, views)
	}
	if got := f.call(t, "echo", map[string]any{"message": "plain"}).Text; got != "Echo: plain" {
		t.Errorf("echo after the task = %q", got)
	}
}

// Over Streamable HTTP: the elicitation the task
// sends on the tasks/result stream becomes a RAP user_choice and the
// answer is POSTed back to the server.
func TestEverythingTaskInputRequiredHTTP(t *testing.T) {
	node, script := everythingServer(t)
	port := startEverythingHTTP(t, node, script)
	f := startBridge(t, &Options{Name: "everything", URL: "http://127.0.0.1:" + port + "/mcp", Logger: quietLogger()})
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "simulate-research-query", map[string]any{"topic": "python", "ambiguous": true})
	if err != nil {
		t.Fatal(err)
	}
	uc := nextChoice(t, ctx, c, 0)
	i := slices.Index(uc.Choices, "Monty Python comedy group")
	if i < 0 {
		t.Fatalf("user_choice = %+v", uc)
	}
	if err := f.rt.Choose(ctx, uc, i); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.ModelText(), "Clarification**: comedy") {
		t.Fatalf("result = %.400q", res.ModelText())
	}
}
