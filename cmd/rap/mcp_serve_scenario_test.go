package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// scenarioTools are the RAP tools the TypeScript scenario drives: what
// they saw goes to their channels.
type scenarioTools struct {
	URL       string
	cancelled chan error // the cause of each "hang" call's end
	picked    chan int   // the answer each "pick" call got
}

// startScenarioTools serves the scenario's RAP tool server: a quick
// tool, one whose result comes 5 s later, one that runs until cancelled,
// one that asks the user, and a subscription whose events wait for
// release_ticks.
func startScenarioTools(t *testing.T) *scenarioTools {
	t.Helper()
	st := &scenarioTools{cancelled: make(chan error, 4), picked: make(chan int, 4)}
	release := make(chan struct{})
	s := rap.NewServer("scenario", &rap.ServerOptions{Description: "rap mcp serve's end-to-end scenario tools.", Logger: slog.New(slog.DiscardHandler),
		Retry: rap.RetryPolicy{Initial: 20 * time.Millisecond, GiveUpAfter: 200 * time.Millisecond}})
	type shoutArgs struct {
		Text string `json:"text" jsonschema:"what to shout"`
	}
	rap.AddTool(s, &rap.Tool{Name: "shout", Description: "Shouts its text."},
		func(_ context.Context, _ *rap.Call, in shoutArgs) (*rap.Reply, error) {
			return rap.Text(strings.ToUpper(in.Text) + "!"), nil
		})
	rap.AddTool(s, &rap.Tool{Name: "simmer", Description: "Reports progress, answers 5 s later."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			if err := c.UpdateView(ctx, "progress", map[string]any{"progress": 1, "total": 2, "message": "simmering"}); err != nil {
				return nil, err
			}
			select {
			case <-time.After(5 * time.Second):
				return rap.Text("soup is ready"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	rap.AddTool(s, &rap.Tool{Name: "hang", Description: "Runs until cancelled."},
		func(ctx context.Context, _ *rap.Call, _ struct{}) (*rap.Reply, error) {
			<-ctx.Done()
			st.cancelled <- context.Cause(ctx)
			return nil, ctx.Err()
		})
	rap.AddTool(s, &rap.Tool{Name: "pick", Description: "Asks the user to pick a colour."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			i, err := c.AskUser(ctx, "Pick a colour", []string{"red", "green", "blue"}, 0, 20*time.Second)
			if err != nil {
				return nil, err
			}
			st.picked <- i
			return rap.Text(fmt.Sprintf("picked %d", i)), nil
		})
	type ticksArgs struct {
		Count int `json:"count" jsonschema:"how many events before the final one"`
	}
	rap.AddSubscription(s, &rap.Tool{Name: "ticks", Description: "Once released, sends count events, then a final one."},
		func(ctx context.Context, sub *rap.Subscription, in ticksArgs) error {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			for i := 1; i <= in.Count; i++ {
				if err := sub.Emit(ctx, fmt.Sprintf(`{"tick":%d}`, i)); err != nil {
					return err
				}
			}
			return sub.Final(ctx, `{"tick":"last"}`, false)
		})
	rap.AddTool(s, &rap.Tool{Name: "release_ticks", Description: "Lets ticks send its events."},
		func(context.Context, *rap.Call, struct{}) (*rap.Reply, error) {
			close(release)
			return rap.Text("released"), nil
		})
	st.URL = serveToolServer(t, s).URL
	return st
}

// scenarioOutput is what rap-mcp-scenario.mjs prints.
type scenarioOutput struct {
	ProtocolVersion string         `json:"protocolVersion"`
	ServerTasks     map[string]any `json:"serverTasks"`
	Tools           []struct {
		Name        string `json:"name"`
		TaskSupport string `json:"taskSupport"`
	} `json:"tools"`
	Shout  scenarioResult `json:"shout"`
	Simmer struct {
		Created struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"created"`
		Statuses []struct {
			Status        string `json:"status"`
			StatusMessage string `json:"statusMessage"`
		} `json:"statuses"`
		Result    scenarioResult `json:"result"`
		Error     *string        `json:"error"`
		ElapsedMs int64          `json:"elapsedMs"`
		Listed    []struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"listed"`
	} `json:"simmer"`
	Hang struct {
		Created, CancelAnswer, After string
	} `json:"hang"`
	Pick         scenarioResult `json:"pick"`
	Elicitations []struct {
		Message string `json:"message"`
	} `json:"elicitations"`
	Ticks struct {
		URI     string `json:"uri"`
		Updates int    `json:"updates"`
		Events  struct {
			Ended  bool `json:"ended"`
			Events []struct {
				Text  string `json:"text"`
				Final bool   `json:"final"`
			} `json:"events"`
		} `json:"events"`
	} `json:"ticks"`
}

type scenarioResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

func (r scenarioResult) text() string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// runScenario runs rap-mcp-scenario.mjs with args and decodes its output.
func runScenario(t *testing.T, node, script string, args ...string) scenarioOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = filepath.Dir(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript scenario failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("the scenario's standard error:\n%s", stderr.String())
	}
	var out scenarioOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("the scenario's output is not its JSON: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return out
}

// checkScenario checks what the TypeScript client saw, and what the RAP
// tools saw.
func checkScenario(t *testing.T, st *scenarioTools, out scenarioOutput) {
	t.Helper()
	if out.ProtocolVersion != "2025-11-25" {
		t.Errorf("negotiated %q, want 2025-11-25", out.ProtocolVersion)
	}
	if out.ServerTasks["requests"] == nil || out.ServerTasks["cancel"] == nil || out.ServerTasks["list"] == nil {
		t.Errorf("the server's tasks capability = %v", out.ServerTasks)
	}
	if len(out.Tools) != 6 {
		t.Errorf("listed %d tools, want 6: %+v", len(out.Tools), out.Tools)
	}
	for _, tool := range out.Tools {
		if tool.TaskSupport != "optional" {
			t.Errorf("tool %s: taskSupport %q, want optional", tool.Name, tool.TaskSupport)
		}
	}
	if got := out.Shout.text(); got != "HELLO!" {
		t.Errorf("shout = %q, want HELLO!", got)
	}
	sim := out.Simmer
	if sim.Error != nil || sim.Created.Status != "working" || sim.Result.text() != "soup is ready" {
		t.Errorf("simmer as a task: created %+v, result %q, error %v; want a working task, then the soup", sim.Created, sim.Result.text(), sim.Error)
	}
	// The task was answered at once and its result came through polling:
	// at least one status report before the terminal one.
	if len(sim.Statuses) < 2 || sim.Statuses[len(sim.Statuses)-1].Status != "completed" {
		t.Errorf("simmer's statuses = %+v, want working ones, then completed", sim.Statuses)
	}
	sawProgress := false
	for _, s := range sim.Statuses {
		sawProgress = sawProgress || strings.Contains(s.StatusMessage, "simmering")
	}
	if !sawProgress {
		t.Errorf("no task status carried the tool's view_update (simmering): %+v", sim.Statuses)
	}
	if sim.ElapsedMs < 4500 {
		t.Errorf("the task's result came after %d ms, before the tool's 5 s", sim.ElapsedMs)
	}
	if len(sim.Listed) == 0 || sim.Listed[0].TaskID != sim.Created.TaskID {
		t.Errorf("tasks/list = %+v, want the simmer task", sim.Listed)
	}
	if out.Hang.Created != "working" || out.Hang.CancelAnswer != "cancelled" || out.Hang.After != "cancelled" {
		t.Errorf("hang: %+v, want working, then cancelled", out.Hang)
	}
	if cause := receive(t, st.cancelled, 10*time.Second, "hang to be cancelled"); !errors.Is(cause, rap.ErrCallCancelled) {
		t.Errorf("hang ended with %v, want rap.ErrCallCancelled (RAP CA-1)", cause)
	}
	if got := out.Pick.text(); got != "picked 1" {
		t.Errorf("pick = %q, want picked 1 (the user answered green)", got)
	}
	if got := receive(t, st.picked, 10*time.Second, "pick's answer"); got != 1 {
		t.Errorf("the tool got choice %d, want 1 (RAP UC-1)", got)
	}
	if len(out.Elicitations) != 1 || !strings.Contains(out.Elicitations[0].Message, "Pick a colour") {
		t.Errorf("elicitations = %+v, want the question", out.Elicitations)
	}
	if !strings.HasPrefix(out.Ticks.URI, "rap-subscription://") || out.Ticks.Updates < 4 {
		t.Errorf("ticks: resource %q with %d updates, want rap-subscription:// with 4", out.Ticks.URI, out.Ticks.Updates)
	}
	ev := out.Ticks.Events
	if !ev.Ended || len(ev.Events) != 4 || ev.Events[0].Text != `{"tick":1}` || !ev.Events[3].Final {
		t.Errorf("the subscription's resource = %+v, want 3 ticks and a final event", ev)
	}
}

// End to end with the official TypeScript SDK's client over stdio: tools
// listed, a synchronous call, a call run as an MCP task whose result
// comes 5 s later through the RAP callback, a task cancelled
// (/cancel_tool_call), a user choice answered through elicitation, and a
// subscription's events as resource updates.
func TestMCPServeTypeScriptScenarioStdio(t *testing.T) {
	node, script := mcpClientScript(t)
	script = filepath.Join(filepath.Dir(script), "rap-mcp-scenario.mjs")
	bin := buildRapBinary(t)
	st := startScenarioTools(t)
	out := runScenario(t, node, script, bin, "mcp", "serve", st.URL)
	checkScenario(t, st, out)
}

// The same scenario over Streamable HTTP with a bearer token.
func TestMCPServeTypeScriptScenarioHTTP(t *testing.T) {
	node, script := mcpClientScript(t)
	script = filepath.Join(filepath.Dir(script), "rap-mcp-scenario.mjs")
	st := startScenarioTools(t)
	endpoint := startMCPServeHTTP(t, "s3cret", st.URL)
	out := runScenario(t, node, script, endpoint, "s3cret")
	checkScenario(t, st, out)
}

// startMCPServeHTTP runs "rap mcp serve --listen" in this process with
// token for the tool servers urls, and returns its endpoint; it stops
// with the test.
func startMCPServeHTTP(t *testing.T, token string, urls ...string) string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	args := append([]string{"mcp", "serve", "--listen", "127.0.0.1:0", "--token", token}, urls...)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("rap mcp serve did not stop within 10 s of its context ending")
		}
	})
	re := regexp.MustCompile(`MCP endpoint \(Streamable HTTP\) at (http://\S+/mcp)`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no endpoint printed; stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// receive returns the next value of ch, or fails after d.
func receive[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("gave up after %v waiting for %s", d, what)
		panic("unreachable")
	}
}
