package main

import (
	"bytes"
	"context"
	"encoding/json"
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
		"you: "+demoAskTime,
		"→ Time in Asia/Tokyo",
		"← get_time_in_zone: ",
		"assistant: In Tokyo it is ",
		"you: "+demoAskClock,
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
		"you: "+demoAskNap,
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
	// RAP SU-7: the built-in cancel_subscription ends the clock.
	wantLines(t, got, "✓ cancellation: cancel_subscription stopped the clock")
	// The transcript keeps the order of the conversation.
	order := []string{"you: " + demoAskTime, "→ Time in Asia/Tokyo", "← get_time_in_zone", "In Tokyo it is", "you: " + demoAskClock, "] » [runtime] This thread (", "← event: Final report", "Tick 1 woke me up",
		"you: " + demoAskNap, "→ sleep(", "← sleep: Woke up", "The timer woke me up", "What the demo showed:"}
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

// With OPENAI_BASE_URL set, the demo uses that model instead of the
// script, and is not labelled as scripted.
func TestDemoUsesConfiguredModel(t *testing.T) {
	clearRAPEnv(t)
	llm := wiretest.NewOpenAI(wiretest.CallToolThenAnswer("get_time_in_zone", json.RawMessage(`{"timezone":"Asia/Tokyo"}`)))
	defer llm.Close()
	t.Setenv("OPENAI_BASE_URL", llm.URL+"/v1")
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	code := run(ctx, []string{"demo", "--step-timeout", "20s"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	got := out.String()
	wantLines(t, got, "model:       openai:", "✓ asynchronous tool call: get_time_in_zone", "The tool answered: ")
	if strings.Contains(got, "not a real LLM") {
		t.Errorf("a real model is labelled as scripted:\n%s", got)
	}
	if len(llm.Requests()) == 0 {
		t.Error("the configured model got no request")
	}
}
