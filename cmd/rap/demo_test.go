package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/wiretest"
)

// rap demo runs with no network and no key: it starts gettime and the
// runtime in one process, plays the scripted conversation, prints the
// transcript and exits 0.
func TestDemo(t *testing.T) {
	clearRAPEnv(t)
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	code := run(ctx, []string{"demo"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("rap demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	t.Logf("rap demo took %v", time.Since(start))
	got := out.String()
	wantLines(t, got,
		"scripted:demo.json (scripted test model — not a real LLM)",
		"tool server: gettime at http://127.0.0.1:",
		"get_current_time, get_time_in_zone, subscribe_clock",
		"toolsets loaded: gettime",
		"you: "+"What time is it in Tokyo?",
		"→ Time in Asia/Tokyo",
		"← get_time_in_zone: ",
		"assistant: In Tokyo it is ",
		"you: "+"Start the clock: wake me on each tick, and stop it after the second tick.",
		"→ Clock every 0.5s, 3 ticks",
		"← subscribe_clock (subscription): Subscribed",
		"← event: ", // inline (RAP SU-5) or a child thread's report (RAP SU-6)
		`"n":1`,
		// RAP SU-6: each tick is handled by a child thread, followed and
		// printed under its short id, which reports back and closes.
		"· child thread ",
		"] » [runtime] This thread (",
		"]   → close_thread(",
		"← event: Final report from child thread ",
		"Tick 1 woke me up",
		"cancel_subscription",
		"── a sleep ──",
		"you: "+"Take a nap of one second, then tell me when you wake up.",
		`→ sleep({"seconds":1,`, // RAP BT-1: the built-in sleep
		"← sleep: Woke up after sleeping 1s.",
		"assistant: The timer woke me up",
		"✓ sleep: the agent called the built-in sleep, the thread hibernated and its timer woke it once",
		"What the demo showed:",
		"✓ discovery",
		"✓ asynchronous tool call: get_time_in_zone",
		"✓ subscription: subscribe_clock was confirmed and ",
	)
	if strings.Contains(got, "✗") {
		t.Errorf("a step failed:\n%s", got)
	}
	// Child threads are shown readably — short ids, no
	// JSON escaped inside JSON, no internal tool names in the summary.
	for _, bad := range []string{`\"`, "receive_event__injected", "(s)"} {
		if strings.Contains(got, bad) {
			t.Errorf("the demo output contains %q:\n%s", bad, got)
		}
	}
	if id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-`).FindString(got); id != "" {
		t.Errorf("the demo output shows a full thread id (%s…), want short ids:\n%s", id, got)
	}
	// Counts agree with their nouns: "1 clock event", "2 clock events".
	if !regexp.MustCompile(`confirmed and (1 clock event|([02-9]|\d\d+) clock events) woke the agent`).MatchString(got) {
		t.Errorf("the subscription's line does not count its clock events in words:\n%s", got)
	}
	// RAP SU-7: the built-in cancel_subscription ends the clock.
	wantLines(t, got, "✓ cancellation: cancel_subscription stopped the clock")
	// The transcript keeps the order of the conversation.
	order := []string{"you: " + "What time is it in Tokyo?", "→ Time in Asia/Tokyo", "← get_time_in_zone", "In Tokyo it is", "you: " + "Start the clock: wake me on each tick, and stop it after the second tick.", "] » [runtime] This thread (", "← event: Final report", "Tick 1 woke me up",
		// A step starts only when the previous one is over.
		"Tick 2 woke me up", "The subscription is cancelled: no more ticks", "── a sleep ──",
		"you: " + "Take a nap of one second, then tell me when you wake up.", "→ sleep(", "← sleep: Woke up", "The timer woke me up", "What the demo showed:"}
	last := -1
	for _, s := range order {
		i := strings.Index(got, s)
		if i < last {
			t.Errorf("%q appears out of order in:\n%s", s, got)
		}
		last = i
	}
}

// A bad --model is a usage error; nothing is started.
func TestDemoBadModel(t *testing.T) {
	clearRAPEnv(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"demo", "--model", "nope:x"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), `unknown provider "nope"`) {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	if strings.Contains(out.String(), "thread ") {
		t.Errorf("the demo started despite the bad model:\n%s", out.String())
	}
}

// The embedded script parses and names the steps the demo relies on.
func TestDemoScriptEmbedded(t *testing.T) {
	for _, w := range []string{"get_time_in_zone", "subscribe_clock", "cancel_subscription", `"sleep"`, subscriptionIDPlaceholder} {
		if !bytes.Contains(demoScript, []byte(w)) {
			t.Errorf("demo script lacks %q", w)
		}
	}
}

// An exported API key or base URL never turns the demo into a
// paid one: without --model it plays the built-in script. --model names
// another model explicitly, and --model scripted is the built-in script.
func TestDemoModelOnlyByFlag(t *testing.T) {
	clearRAPEnv(t)
	llm := wiretest.NewOpenAI(wiretest.CallToolThenAnswer("get_time_in_zone", json.RawMessage(`{"timezone":"Asia/Tokyo"}`)))
	defer llm.Close()
	t.Setenv("OPENAI_BASE_URL", llm.URL+"/v1")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key")
	for _, args := range [][]string{{"demo"}, {"demo", "--model", "scripted"}} {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		code := run(ctx, args, &out, &errOut)
		cancel()
		if code != 0 {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errOut.String())
		}
		wantLines(t, out.String(), "model:       scripted:demo.json (scripted test model — not a real LLM)")
	}
	if n := len(llm.Requests()); n != 0 {
		t.Errorf("the demo sent %d request(s) to the model of the environment; want none without --model", n)
	}

	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	code := run(ctx, []string{"demo", "--model", "openai", "--step-timeout", "20s"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	got := out.String()
	wantLines(t, got, "model:       openai:", "✓ asynchronous tool call: get_time_in_zone", "The tool answered: ")
	if strings.Contains(got, "not a real LLM") {
		t.Errorf("a real model is labelled as scripted:\n%s", got)
	}
	if len(llm.Requests()) == 0 {
		t.Error("the model named by --model got no request")
	}
}

// With a script that skips the demo's steps, the demo
// reports each missing step and exits 1, as its help says.
func TestDemoFailsWhenAStepDidNotHappen(t *testing.T) {
	clearRAPEnv(t)
	script := filepath.Join(t.TempDir(), "lazy.json")
	if err := os.WriteFile(script, []byte(`[{"text": "I will not do that.", "repeat": true}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	code := run(ctx, []string{"demo", "--model", "scripted:" + script, "--step-timeout", "20s"}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	wantLines(t, out.String(), "✗ asynchronous tool call", "✗ sleep")
	if !strings.Contains(errOut.String(), "demo failed") {
		t.Errorf("stderr should say the demo failed: %q", errOut.String())
	}

	// The built-in script without its cancellation: the demo used to
	// report "– cancellation: the model did not cancel" and exit 0.
	var full struct {
		Turns []map[string]any `json:"turns"`
	}
	if err := json.Unmarshal(demoScript, &full); err != nil {
		t.Fatal(err)
	}
	for _, turn := range full.Turns {
		if calls, ok := turn["tool_calls"].([]any); ok && len(calls) == 1 && strings.Contains(fmt.Sprint(calls[0]), "cancel_subscription") {
			delete(turn, "tool_calls")
		}
	}
	b, _ := json.Marshal(full)
	noCancel := filepath.Join(t.TempDir(), "nocancel.json")
	if err := os.WriteFile(noCancel, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	code = run(ctx, []string{"demo", "--model", "scripted:" + noCancel, "--step-timeout", "20s"}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "✗ cancellation") {
		t.Errorf("without the cancellation: exit %d, want 1 and a ✗ cancellation line\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
}

// --log-level and --log-format reach the demo's runtime
// and tool server: with --verbose and --log-format json its log lines on
// stderr are JSON objects, and --log-level error hides the Info lines.
func TestDemoHonoursLogFlags(t *testing.T) {
	clearRAPEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"demo", "--verbose", "--log-format", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("rap demo exited %d\nstderr:\n%s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("rap demo --verbose logged nothing")
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["level"] == nil {
			t.Fatalf("with --log-format json, stderr line %q is not a JSON log record", l)
		}
	}
	out.Reset()
	errOut.Reset()
	if code := run(ctx, []string{"demo", "--verbose", "--log-level", "error"}, &out, &errOut); code != 0 {
		t.Fatalf("rap demo exited %d\nstderr:\n%s", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "level=INFO") {
		t.Fatalf("with --log-level error, stderr shows Info lines:\n%s", errOut.String())
	}
}
