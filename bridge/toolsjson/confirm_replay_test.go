package toolsjson

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// A requires_confirmation tool asks the user (Allow / Deny, default Deny)
// with a RAP user_choice naming the tool and showing its arguments; Deny
// leaves it unrun, Allow runs it, NoConfirm skips the question.
func TestConfirmationGate(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	tool := writeScript(t, `echo x >> `+marker+`; echo '{"echo":"done"}'`)
	dir := writeBundle(t, bundleOf(strings.TrimSuffix(execTool("mail.send", tool, ""), "}")+`,"requires_confirmation":true}`), "")
	s := serveBundle(t, dir, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ask := func(selected int) string {
		call, err := s.rt.Invoke(ctx, s.url, "mail_send", map[string]any{"text": "to bob"})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := call.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		uc, ok := msg.(*rap.UserChoice)
		if !ok {
			t.Fatalf("first message is %T, want a user_choice", msg)
		}
		mustContain(t, uc.Prompt, `"mail.send"`, `"text":"to bob"`)
		if strings.Join(uc.Choices, ",") != "Allow,Deny" || uc.Default != 1 {
			t.Fatalf("choices %v default %d", uc.Choices, uc.Default)
		}
		if _, err := os.Stat(marker); err == nil && selected == 1 {
			t.Fatal("the tool ran before the user chose")
		}
		if err := s.rt.Choose(ctx, uc, selected); err != nil {
			t.Fatal(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res.ModelText()
	}
	mustContain(t, ask(1), "Error: the user denied running tool \"mail.send\"; it did not run")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a denied tool ran")
	}
	if got := ask(0); got != `{"echo":"done"}` {
		t.Fatalf("allowed result %q", got)
	}
	// security.confirm_external_actions disabled: no question.
	s2 := serveBundle(t, dir, Options{NoConfirm: true})
	if got := s2.invoke(t, "mail_send", map[string]any{"text": "x"}); got != `{"echo":"done"}` {
		t.Fatalf("NoConfirm result %q", got)
	}
}

// Every call writes CT_TOOL_CALL and CT_TOOL_RESULT frames; replay answers
// recorded calls byte for byte without running anything, twice the same,
// flags calls with no recorded frame and tools missing from the bundle.
func TestTraceAndReplay(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "count")
	tool := writeScript(t, `echo x >> `+counter+`; n=$(wc -l < `+counter+`); text=$(sed -e 's/.*"text":"\([^"]*\)".*/\1/' "$1"); printf '{"echo":"%s #%s"}' "$text" $n`)
	fail := writeScript(t, `echo broken >&2; exit 1`)
	entry := strings.TrimSuffix(execTool("kb.echo", tool, ""), "}") + `,"budget":{"tokens":100,"usd":0.5},"observability":{"tags":["kb","local"]}}`
	dir := writeBundle(t, bundleOf(entry, execTool("kb.fail", fail, "")), "")
	traceDir := t.TempDir()
	rec := serveBundle(t, dir, Options{TraceDir: traceDir})
	inputs := []map[string]any{{"text": "a"}, {"text": "b"}, {"text": "a"}}
	var want []string
	for _, in := range inputs {
		want = append(want, rec.invoke(t, "kb_echo", in))
	}
	want = append(want, rec.invoke(t, "kb_fail", map[string]any{"text": "z"}))
	if want[0] != `{"echo":"a #1"}` || want[2] != `{"echo":"a #3"}` {
		t.Fatalf("recorded %q", want)
	}
	trace, err := os.ReadFile(rec.srv.TracePath())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(trace)), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d frames:\n%s", len(lines), trace)
	}
	mustContain(t, lines[0], `"type":"CT_TOOL_CALL"`, `"tool_id":"kb.echo"`, `"input_schema":"inline"`, `"payload":{"text":"a"}`, `"tags":["kb","local"]`, `"budget":{"tokens":100,"usd":0.5}`, `"ts":"`)
	mustContain(t, lines[1], `"type":"CT_TOOL_RESULT"`, `"payload":{"echo":"a #1"}`, `"duration_ms":`)
	mustContain(t, lines[7], `"type":"CT_TOOL_RESULT"`, `"tool_id":"kb.fail"`, `"error":"Error: tool \"kb.fail\"`)
	if fi, _ := os.Stat(rec.srv.TracePath()); fi.Mode().Perm() != 0o600 {
		t.Errorf("trace mode %v", fi.Mode().Perm())
	}

	replayOnce := func() []string {
		rp, err := LoadReplay(rec.srv.TracePath())
		if err != nil {
			t.Fatal(err)
		}
		b, err := Load(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m := rp.Missing(b); len(m) != 0 {
			t.Fatalf("missing %v", m)
		}
		s := serveLoaded(t, b, Options{Replay: rp})
		var got []string
		for _, in := range inputs {
			got = append(got, s.invoke(t, "kb_echo", in))
		}
		got = append(got, s.invoke(t, "kb_fail", map[string]any{"text": "z"}))
		mustContain(t, s.invoke(t, "kb_echo", map[string]any{"text": "never"}), "Error: replay: the trace has no recorded result for tool \"kb.echo\"")
		return got
	}
	before, _ := os.ReadFile(counter)
	first, second := replayOnce(), replayOnce()
	if strings.Join(first, "\n") != strings.Join(want, "\n") || strings.Join(second, "\n") != strings.Join(first, "\n") {
		t.Fatalf("replay differs:\nrecorded %q\nfirst    %q\nsecond   %q", want, first, second)
	}
	if after, _ := os.ReadFile(counter); !bytes.Equal(before, after) {
		t.Fatal("replay ran the tool")
	}

	// A tool the trace records but the bundle lacks is flagged.
	dir2 := writeBundle(t, bundleOf(entry), "")
	b2, err := Load(dir2, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp, _ := LoadReplay(rec.srv.TracePath())
	if m := rp.Missing(b2); len(m) != 1 || m[0] != "kb.fail" {
		t.Fatalf("missing %v", m)
	}
}
