package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
)

// countingTool serves gettime and counts the POSTs to each path.
type countingTool struct {
	*httptest.Server
	mu    sync.Mutex
	posts map[string]int
}

func serveCountingGettime(t *testing.T, opts *rap.ServerOptions) *countingTool {
	t.Helper()
	if opts == nil {
		opts = &rap.ServerOptions{}
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	s := gettime.New(opts)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ct := &countingTool{posts: map[string]int{}}
	ct.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			ct.mu.Lock()
			ct.posts[r.URL.Path]++
			ct.mu.Unlock()
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		ct.Close()
	})
	return ct
}

func (ct *countingTool) count(path string) int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.posts[path]
}

// jsonLines decodes each line of out as a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q is not a JSON object: %v", line, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func invokeContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestInvokePrintsResult(t *testing.T) {
	tool := serveCountingGettime(t, nil)
	code, out, errOut := runVerb(t, invokeContext(t), "invoke", tool.URL, "get_time_in_zone", `{"timezone":"UTC"}`, "--thread", "thread-a")
	if code != 0 {
		t.Fatalf("status %d, stderr:\n%s", code, errOut)
	}
	msgs := jsonLines(t, out)
	if len(msgs) != 1 || msgs[0]["type"] != "tool_result" || msgs[0]["group_id"] != "thread-a" ||
		!strings.Contains(msgs[0]["text"].(string), "(UTC, UTC)") {
		t.Errorf("stdout = %s", out)
	}
	if !strings.Contains(errOut, `toolset "gettime"`) {
		t.Errorf("stderr lacks progress: %s", errOut)
	}
}

// RAP IN-2: invalid arguments are reported, naming the field, and nothing
// is sent.
func TestInvokeInvalidArguments(t *testing.T) {
	tool := serveCountingGettime(t, nil)
	ctx := invokeContext(t)
	code, out, errOut := runVerb(t, ctx, "invoke", tool.URL, "get_time_in_zone", `{"timezone": 7}`)
	if code != 1 || out != "" {
		t.Errorf("status %d, stdout %q", code, out)
	}
	if !strings.Contains(errOut, "arguments.timezone") || !strings.Contains(errOut, "nothing was sent") {
		t.Errorf("stderr does not name the field:\n%s", errOut)
	}
	code, _, errOut = runVerb(t, ctx, "invoke", tool.URL, "get_weather")
	if code != 1 || !strings.Contains(errOut, `no tool "get_weather"`) || !strings.Contains(errOut, "get_current_time") {
		t.Errorf("unknown tool: status %d, stderr:\n%s", code, errOut)
	}
	if n := tool.count(rap.InvokePath) + tool.count("/"); n != 0 {
		t.Errorf("%d invocations were sent", n)
	}
}

func TestInvokeUsageErrors(t *testing.T) {
	ctx := invokeContext(t)
	for _, args := range [][]string{
		{"invoke"},
		{"invoke", "http://127.0.0.1:1"},
		{"invoke", "127.0.0.1:1", "op"},
		{"invoke", "http://127.0.0.1:1", "op", `[1,2]`},
		{"invoke", "http://127.0.0.1:1", "op", `{bad`},
	} {
		if code, _, errOut := runVerb(t, ctx, args...); code != 2 || !strings.Contains(errOut, "usage: rap invoke") {
			t.Errorf("%q: status %d, stderr %q", args, code, errOut)
		}
	}
	code, _, errOut := runVerb(t, ctx, "invoke", "http://127.0.0.1:1", "op")
	if code != 1 || !strings.Contains(errOut, "tool server is running") {
		t.Errorf("unreachable server: status %d, stderr %q", code, errOut)
	}
}

// RAP SU-1, SU-2, SU-4: a subscription prints its events until the final one.
func TestInvokeSubscriptionUntilFinal(t *testing.T) {
	tool := serveCountingGettime(t, nil)
	code, out, errOut := runVerb(t, invokeContext(t), "invoke", "--wait", "20s", tool.URL, "subscribe_clock", `{"interval_seconds":0.1,"count":3}`)
	if code != 0 {
		t.Fatalf("status %d, stderr:\n%s", code, errOut)
	}
	msgs := jsonLines(t, out)
	if len(msgs) != 4 || msgs[0]["subscription"] != true || msgs[3]["final"] != true {
		t.Errorf("stdout:\n%s", out)
	}
	if tool.count(rap.CancelToolCallPath) != 0 {
		t.Error("cancelled a subscription that ended by itself")
	}
}

// RAP CA-1: when the wait is over, the subscription is cancelled.
func TestInvokeSubscriptionWaitCancels(t *testing.T) {
	tool := serveCountingGettime(t, nil)
	code, out, errOut := runVerb(t, invokeContext(t), "invoke", tool.URL, "subscribe_clock", `{"interval_seconds":0.1}`, "--wait", "450ms")
	if code != 0 {
		t.Fatalf("status %d, stderr:\n%s", code, errOut)
	}
	msgs := jsonLines(t, out)
	if len(msgs) < 2 || msgs[1]["type"] != "subscription_event" {
		t.Errorf("stdout:\n%s", out)
	}
	if n := tool.count(rap.CancelToolCallPath); n != 1 {
		t.Errorf("%d /cancel_tool_call requests, want 1", n)
	}
	// --wait 0: exit after the confirmation and cancel.
	code, out, _ = runVerb(t, invokeContext(t), "invoke", tool.URL, "subscribe_clock", `{"interval_seconds":60}`)
	if code != 0 || len(jsonLines(t, out)) != 1 || tool.count(rap.CancelToolCallPath) != 2 {
		t.Errorf("--wait 0: status %d, stdout %q, cancels %d", code, out, tool.count(rap.CancelToolCallPath))
	}
}

// watchWriter signals when its content first contains a string.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return n, err
}

// RAP CA-1: Ctrl-C sends /cancel_tool_call before exiting.
func TestInvokeInterruptCancels(t *testing.T) {
	tool := serveCountingGettime(t, nil)
	ctx, cancel := context.WithCancel(invokeContext(t))
	seen := make(chan struct{})
	out := &watchWriter{want: `"subscription_event"`, seen: seen}
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"invoke", "--wait", "1m", tool.URL, "subscribe_clock", `{"interval_seconds":0.1}`}, out, &errOut)
	}()
	select {
	case <-seen:
	case <-time.After(20 * time.Second):
		t.Fatal("no event printed")
	}
	cancel() // what Ctrl-C does through signal.NotifyContext
	select {
	case code := <-done:
		if code != 130 {
			t.Errorf("status %d, want 130", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("rap invoke did not stop after the interrupt")
	}
	if n := tool.count(rap.CancelToolCallPath); n != 1 {
		t.Errorf("%d /cancel_tool_call requests, want 1", n)
	}
}

// RAP CA-3, TR-8: --tool-token is sent with the invocation and the cancellation.
func TestInvokeToken(t *testing.T) {
	tool := serveCountingGettime(t, &rap.ServerOptions{BearerToken: "s3cret"})
	t.Setenv(envToolToken, "")
	code, _, errOut := runVerb(t, invokeContext(t), "invoke", tool.URL, "get_current_time")
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("without token: status %d, stderr %q", code, errOut)
	}
	code, out, errOut := runVerb(t, invokeContext(t), "invoke", "--tool-token", "s3cret", tool.URL, "get_current_time")
	if code != 0 || !strings.Contains(out, `"tool_result"`) {
		t.Errorf("with --tool-token: status %d, stderr %q", code, errOut)
	}
	if strings.Contains(errOut, "s3cret") || strings.Contains(out, "s3cret") {
		t.Error("the token was printed")
	}
	// --token, the old spelling, still works here (it is
	// unambiguous: invoke has no client token) but says it is deprecated.
	code, out, errOut = runVerb(t, invokeContext(t), "invoke", "--token", "s3cret", tool.URL, "get_current_time")
	if code != 0 || !strings.Contains(out, `"tool_result"`) || !strings.Contains(errOut, "deprecated, use --tool-token") {
		t.Errorf("with the deprecated --token: status %d, stderr %q", code, errOut)
	}
	t.Setenv(envToolToken, "s3cret")
	if code, _, errOut := runVerb(t, invokeContext(t), "invoke", tool.URL, "get_current_time"); code != 0 {
		t.Errorf("with $%s: status %d, stderr %q", envToolToken, code, errOut)
	}
	// A flag wins over the environment, under its deprecated name too.
	t.Setenv(envToolToken, "wrong")
	if code, _, errOut := runVerb(t, invokeContext(t), "invoke", "--token", "s3cret", tool.URL, "get_current_time"); code != 0 {
		t.Errorf("--token with a wrong $%s: status %d, stderr %q", envToolToken, code, errOut)
	}
	if code, _, errOut := runVerb(t, invokeContext(t), "invoke", "--tool-token", "s3cret", tool.URL, "get_current_time"); code != 0 {
		t.Errorf("--tool-token with a wrong $%s: status %d, stderr %q", envToolToken, code, errOut)
	}
}

// confirmTool asks the user to confirm (RAP UC-1) after an authorization
// request (RAP OA-1), and returns the label chosen.
func confirmTool(t *testing.T) string {
	t.Helper()
	s := rap.NewServer("confirm", &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	rap.AddTool(s, &rap.Tool{Name: "confirm", Description: "asks the user", InputSchema: rap.EmptyObjectSchema},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			if err := c.RequestOAuth(ctx, "https://auth.example/authorize"); err != nil {
				return nil, err
			}
			choices := []string{"yes", "no", "later"}
			i, err := c.AskUser(ctx, "Proceed?", choices, 2, 20*time.Second)
			if err != nil {
				return nil, err
			}
			return rap.Text("picked " + choices[i]), nil
		})
	srv := serveToolServer(t, s)
	return srv.URL
}

// RAP UC-2: rap invoke answers a user_choice with --choose, or with the
// default as a dismissal does; an oauth request is shown and the call
// stays pending (RAP OA-1).
func TestInvokeUserChoiceAndOAuth(t *testing.T) {
	url := confirmTool(t)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--choose", "0"}, "picked yes"},
		{nil, "picked later"},
		{[]string{"--choose", "9"}, "picked later"},
	} {
		args := append([]string{"invoke", url, "confirm"}, tc.flags...)
		code, out, errOut := runVerb(t, invokeContext(t), args...)
		if code != 0 {
			t.Fatalf("%v: status %d, stderr:\n%s", tc.flags, code, errOut)
		}
		msgs := jsonLines(t, out)
		if len(msgs) != 3 || msgs[0]["type"] != "oauth" || msgs[1]["type"] != "user_choice" || msgs[2]["text"] != tc.want {
			t.Errorf("%v: stdout:\n%s", tc.flags, out)
		}
		if !strings.Contains(errOut, "https://auth.example/authorize") {
			t.Errorf("%v: the authorization URL was not shown:\n%s", tc.flags, errOut)
		}
	}
}

// A tool that acknowledges and never answers: --timeout gives up, cancels
// the call and exits 1.
func TestInvokeTimeout(t *testing.T) {
	var mu sync.Mutex
	cancels := 0
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case rap.WellKnownPath:
			json.NewEncoder(w).Encode(rap.Toolset{Name: "silent", Endpoint: srv.URL + "/invoke",
				Tools: []rap.Tool{{Name: "wait", Description: "never answers", InputSchema: rap.EmptyObjectSchema}}})
		case rap.CancelToolCallPath:
			mu.Lock()
			cancels++
			mu.Unlock()
		}
	}))
	defer srv.Close()
	code, out, errOut := runVerb(t, invokeContext(t), "invoke", "--timeout", "300ms", srv.URL, "wait")
	if code != 1 || out != "" || !strings.Contains(errOut, "--timeout") {
		t.Errorf("status %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if cancels != 1 {
		t.Errorf("%d /cancel_tool_call requests, want 1", cancels)
	}
}
