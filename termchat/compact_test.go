package termchat

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
)

// compactScript summarises when the runtime asks for a summary (a
// two-line one), and repeats everything else.
func compactScript() *scripted.Model {
	return scripted.New([]scripted.Turn{
		{When: &scripted.When{UserContains: "Summarize the conversation above"}, Text: "SUMMARY: the user counted.\nThen went on.", Repeat: true},
		{Text: "You said: {{last_user}}", Repeat: true},
	})
}

// compactedTwo is the line of a compaction of the first two messages by
// compactScript.
const compactedTwo = "  · compacted 2 earlier messages (the model sees a summary): SUMMARY: the user counted.…\n"

func TestCompactionLine(t *testing.T) {
	for _, tc := range []struct {
		c    api.Compaction
		want string
	}{
		{api.Compaction{UpToSeq: 1, Messages: 1, Summary: "All of it."}, "  · compacted 1 earlier message (the model sees a summary): All of it.\n"},
		{api.Compaction{UpToSeq: 9, Messages: 9, Summary: "\n  First line.\nSecond line."}, "  · compacted 9 earlier messages (the model sees a summary): First line.…\n"},
		// No escape sequence of the model's reaches the terminal.
		{api.Compaction{UpToSeq: 9, Messages: 9, Summary: "a \x1b[31mred\x1b[0m word"}, "  · compacted 9 earlier messages (the model sees a summary): a \uFFFD[31mred\uFFFD[0m word\n"},
		{api.Compaction{UpToSeq: 9, Messages: 9, Summary: strings.Repeat("x", 500) + "\nmore"}, "  · compacted 9 earlier messages (the model sees a summary): " + strings.Repeat("x", maxSummaryLine) + "…\n"},
	} {
		if got := compactionLine(tc.c); got != tc.want {
			t.Errorf("compactionLine(%+v) = %q; want %q", tc.c, got, tc.want)
		}
	}
}

// A printed history shows each compaction's line right after the last
// message its summary covers (after that message's calls), before the
// messages it does not cover; a compaction of a child's inherited
// messages is shown before the child's own; the compacted event of a
// compaction already shown prints nothing more.
func TestTranscriptPrintsCompactionsWhereTheyEnd(t *testing.T) {
	var out bytes.Buffer
	tr := newTranscript(&out, Display{})
	tr.self = "th"
	tr.expectCompactions([]api.Compaction{
		{UpToSeq: 4, Messages: 4, Summary: "second"},
		{UpToSeq: 1, Messages: 1, Summary: "inherited"},
	})
	tr.history([]api.Message{
		{ThreadID: "parent", Seq: 1, Role: api.RoleUser, Text: "from the parent"},
		{ThreadID: "th", Seq: 2, Role: api.RoleUser, Text: "one"},
		{ThreadID: "th", Seq: 3, Role: api.RoleAssistant, Text: "calling", ToolCalls: []api.ToolCall{{ID: "c1", Name: "tick"}}},
		{ThreadID: "th", Seq: 4, Role: api.RoleTool, ToolResults: []api.ToolResult{{CallID: "c1", Name: "tick", Text: "ticked"}}},
		{ThreadID: "th", Seq: 5, Role: api.RoleUser, Text: "two"},
	})
	tr.event(Event{Type: "compacted", Data: mustJSON(api.Compaction{UpToSeq: 4, Messages: 4, Summary: "second"})})
	want := "  · compacted 1 earlier message (the model sees a summary): inherited\n" +
		"you: one\n" +
		"assistant: calling\n" +
		"  → tick()\n" +
		"  ← tick: ticked\n" +
		"  · compacted 4 earlier messages (the model sees a summary): second\n" +
		"you: two\n"
	if got := out.String(); got != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, want)
	}
	tr.event(Event{Type: "compacted", Data: mustJSON(api.Compaction{UpToSeq: 5, Messages: 5, Summary: "third"})})
	if got := out.String(); !strings.HasSuffix(got, "you: two\n  · compacted 5 earlier messages (the model sees a summary): third\n") {
		t.Errorf("a new compaction's event is not printed at once:\n%s", got)
	}
}

// /compact on a thread with too little to summarise says why and the
// chat goes on (exit status 0); after eight messages it says that the
// model is writing, then prints the compaction's line once (its answer
// and its compacted event are one compaction); resuming the thread
// prints the line again, right after the last message the summary
// covers; and an interactive chat prints the line of a compaction made
// elsewhere as it happens.
func TestChatCompact(t *testing.T) {
	rt := startTestRuntime(t, compactScript())
	out, errOut, err := runChatFor(t, Options{Server: rt.URL}, "/compact\none\ntwo\nthree\nfour\n/compact\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	if !strings.Contains(errOut, "rap chat: /compact: not compacted: nothing to compact yet: the thread has 0 messages") {
		t.Errorf("compacting an empty thread does not say why; stderr:\n%s", errOut)
	}
	if strings.Contains(errOut, "bad input") {
		t.Errorf("the refusal speaks of %q, words a person does not know; stderr:\n%s", "bad input", errOut)
	}
	wantLines(t, out, "assistant: You said: four\n  · compacting… the model is writing a summary\n"+compactedTwo)
	if n := strings.Count(out, "· compacted "); n != 1 {
		t.Errorf("the compaction is printed %d times; want once\n%s", n, out)
	}
	threads, err := rt.Threads(context.Background())
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads = %v, %v", threads, err)
	}
	id := threads[0].ID

	out, errOut, err = runChatFor(t, Options{Server: rt.URL, Thread: id}, "")
	if err != nil {
		t.Fatalf("resume: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out, "you: one\nassistant: You said: one\n"+compactedTwo+"you: two\n")
	if n := strings.Count(out, "· compacted "); n != 1 {
		t.Errorf("resumed, the compaction is printed %d times; want once\n%s", n, out)
	}

	d := startChat(t, Options{Server: rt.URL, Thread: id}, true)
	d.waitOut(t, "you> ")
	for _, text := range []string{"five", "six"} {
		if err := rt.PostMessage(context.Background(), id, text); err != nil {
			t.Fatal(err)
		}
		if err := rt.Idle(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	d.waitOut(t, "assistant: You said: six\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rt.CompactThread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d.waitOut(t, compactionLine(c))
	if err := d.finish(t); err != nil {
		t.Errorf("chat: %v\nstderr: %s", err, d.errOut.String())
	}
}
