package termchat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/api"
)

func TestBudgetText(t *testing.T) {
	for _, c := range []struct {
		b    api.Budget
		want string
	}{
		{api.Budget{Tool: "fetch", TokensLimit: 200, TokensSpent: 512, USDLimit: 0.5, USDSpent: 0.0123}, "fetch: 512 of 200 tokens (over budget), $0.0123 of $0.50"},
		{api.Budget{Tool: "fetch", TokensLimit: 2000, TokensSpent: 1999}, "fetch: 1,999 of 2,000 tokens"},
		{api.Budget{Tool: "fetch", TokensSpent: 40, USDLimit: 1, USDSpent: 1}, "fetch: $1.00 of $1.00 (over budget)"},
		{api.Budget{Tool: "fetch", TokensSpent: 40}, ""},
		{api.Budget{Tool: "fetch", USDLimit: 1, USDSpent: 0.5, Unpriced: true}, "fetch: $0.50 of $1.00 (not counting a model without a known price)"},
	} {
		if got := budgetText(c.b); got != c.want {
			t.Errorf("budgetText(%+v) = %q; want %q", c.b, got, c.want)
		}
	}
	for _, c := range []struct {
		b    *api.SessionBudget
		want string
	}{
		{nil, ""},
		{&api.SessionBudget{TokensLimit: 20000, TokensSpent: 27158, USDLimit: 5, USDSpent: 0.25, Over: true}, "27,158 of 20,000 tokens (over budget), $0.25 of $5.00"},
		{&api.SessionBudget{USDLimit: 5, USDSpent: 0, Unpriced: true}, "$0.00 of $5.00 (not counting a model without a known price)"},
	} {
		if got := sessionBudgetText(c.b); got != c.want {
			t.Errorf("sessionBudgetText(%+v) = %q; want %q", c.b, got, c.want)
		}
	}
}

// /usage prints the session's budget with what the session spent, "over
// budget" once spent; past it the next message gets the runtime's error
// naming the budget, and the chat ends failed with the message kept.
func TestChatUsageShowsSessionBudget(t *testing.T) {
	rt := startTestRuntimeWith(t, withUsage(timeScript()), func(c *runtime.Config) { c.SessionBudget = runtime.SessionBudget{Tokens: 20000} })
	out, errOut, err := runChatFor(t, Options{Server: rt.URL, Wait: 20 * time.Second}, "hello\n/usage\nagain\n/usage\nthird\n")
	if ExitCode(err) != ExitFailure {
		t.Fatalf("chat: err = %v (exit %d); want exit 1 once the budget refuses a message\n%s", err, ExitCode(err), errOut)
	}
	wantLines(t, out, "assistant: You said: hello\n",
		"  · budget of the session: 13,579 of 20,000 tokens\n",
		"assistant: You said: again\n",
		"  · budget of the session: 27,158 of 20,000 tokens (over budget)\n",
		"! error: this session has used its budget", `raise "session_budget" in rap.json and restart rap serve`)
	if strings.Contains(out, "You said: third") {
		t.Errorf("the message past the budget was answered:\n%s", out)
	}
}

// /usage lists the budget of each of the session's tools that has one,
// with what it spent, "over budget" once it spent it all; on a session
// whose tools have none it prints no budget line.
func TestChatUsageShowsBudgets(t *testing.T) {
	srv := rap.NewServer("data", &rap.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	budget := &rap.Annotations{Custom: map[string]json.RawMessage{runtime.AnnotationBudget: json.RawMessage(`{"tokens":5}`)}}
	rap.AddTool(srv, &rap.Tool{Name: "fetch", Description: "fetches data", Annotations: budget}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		return rap.Text("DATA " + strings.Repeat("lorem ipsum ", 20)), nil
	})
	rap.AddTool(srv, &rap.Tool{Name: "peek", Description: "peeks at data", Annotations: &rap.Annotations{Custom: map[string]json.RawMessage{runtime.AnnotationBudget: json.RawMessage(`{"tokens":1000}`)}}},
		func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			return rap.Text("peeked"), nil
		})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Shutdown(context.Background()) })
	m := scripted.New([]scripted.Turn{
		{AfterUser: "fetch it", Text: "fetching", ToolCalls: []scripted.Call{{Name: "fetch", Arguments: json.RawMessage(`{}`)}}},
		{When: &scripted.When{LastResultContains: "DATA", LastInput: "tool_result"}, Text: "got it"},
	})
	rt := startTestRuntime(t, m, hs.URL)
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "fetch it\n/usage\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	threads, err := rt.Threads(context.Background())
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads = %+v, %v; want one", threads, err)
	}
	info, err := rt.ThreadInfo(context.Background(), threads[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var spent int64
	for _, b := range info.Budgets {
		if b.Tool == "fetch" {
			spent = b.TokensSpent
		}
	}
	if spent < 5 {
		t.Fatalf("the runtime reports budgets %+v; want fetch past its 5 tokens", info.Budgets)
	}
	wantLines(t, out, "assistant: got it\n",
		fmt.Sprintf("  · budget of fetch: %d of 5 tokens (over budget)\n", spent),
		"  · budget of peek: 0 of 1,000 tokens\n")

	plain := startTestRuntime(t, withUsage(timeScript()))
	out, errOut, err = runChatFor(t, Options{Server: plain.URL}, "hello\n/usage\n")
	if err != nil {
		t.Fatalf("chat without budgets: %v\nstderr: %s", err, errOut)
	}
	if strings.Contains(out, "budget") {
		t.Errorf("/usage on a session whose tools have no budget prints one:\n%s", out)
	}
}
