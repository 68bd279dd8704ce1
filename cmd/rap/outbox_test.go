package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// "rap outbox" lists a durable store's dead letters with
// redacted URLs, and retries and drops them.
func TestOutboxVerb(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tools.db")
	st, err := durable.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k-old", "k-refused"} {
		m := rap.OutboxMessage{Key: key, URL: "https://rt.example/cb/abcdefghijklmnopqrstuvwxyz0123?token=s3cret", Body: []byte(`{"type":"tool_result","group_id":"g","id":"` + key + `"}`)}
		if err := st.Enqueue(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DeadLetter(ctx, "k-old", 503, "not delivered after 9 attempts in 24h0m0s, the maximum retry age (RetryPolicy.GiveUpAfter)"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeadLetter(ctx, "k-refused", 404, `refused with HTTP 404 (not retried): "unknown call"`); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, out, errOut := runVerb(t, ctx, "outbox", "--store", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"0 callbacks pending delivery, 2 dead letters", "k-old", "k-refused", "503", "404", "maximum retry age", "https://rt.example/cb/redacted"} {
		if !strings.Contains(out, want) {
			t.Errorf("list output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, "abcdefghijklmnopqrstuvwxyz") {
		t.Errorf("list output shows the callback URL's tokens:\n%s", out)
	}

	code, out, _ = runVerb(t, ctx, "outbox", "list", "--json", "--store", path)
	var first map[string]any
	if code != 0 || json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first) != nil || first["key"] != "k-old" || first["type"] != "tool_result" {
		t.Errorf("--json: exit %d, first line %v:\n%s", code, first, out)
	}

	if code, out, errOut = runVerb(t, ctx, "outbox", "retry", "--store", path, "k-old"); code != 0 || !strings.Contains(out, "k-old: queued again") {
		t.Errorf("retry: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = runVerb(t, ctx, "outbox", "drop", "--store", path, "k-refused", "k-none"); code != 1 || !strings.Contains(out, "k-refused: dropped") || !strings.Contains(errOut, "k-none") {
		t.Errorf("drop with an unknown key: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if code, out, _ = runVerb(t, ctx, "outbox", "--store", path); code != 0 || !strings.Contains(out, "1 callback pending delivery, 0 dead letters") {
		t.Errorf("after retry and drop: exit %d\n%s", code, out)
	}

	if code, _, errOut = runVerb(t, ctx, "outbox"); code != 2 || !strings.Contains(errOut, "--store") {
		t.Errorf("without --store: exit %d, %s", code, errOut)
	}
	if code, _, errOut = runVerb(t, ctx, "outbox", "--store", filepath.Join(t.TempDir(), "missing.db")); code != 1 || !strings.Contains(errOut, "missing.db") {
		t.Errorf("missing store: exit %d, %s", code, errOut)
	}
	if code, out, _ := runVerb(t, ctx, "outbox", "--help"); code != 0 || !strings.Contains(out, "Examples:") {
		t.Errorf("--help: exit %d, %s", code, out)
	}
}
