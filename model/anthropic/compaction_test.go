package anthropic_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/wiretest"
)

// compactionBlock is a compaction block as a server could send it: spacing,
// member order, an unknown member, tool changes and characters
// encoding/json would escape, all of which must come back unchanged.
const compactionBlock = `{ "type":"compaction", "signature" : "c2ln+/=" ,"content":"Summary <a & b>: the user wants \u00e9 and \"quotes\".",` +
	`"encrypted_content":"ZW5jcnlwdGVk","tool_changes":[ {"type":"tool_removal","tool":{"type":"custom","name":"old"}} ],"future_field":{"x":[1, 2]} }`

// withBreakpoint is a stored block as a later request sends it: all its
// bytes but the closing brace, then a cache_control member and the brace.
func withBreakpoint(block []byte) []byte {
	out := append([]byte(nil), block[:len(block)-1]...)
	return append(out, []byte(`,"cache_control":{"type":"ephemeral"}}`)...)
}

// With CompactAt, a request carries the compaction beta header and a
// compact_20260112 edit triggered at that many input tokens; the
// compaction block the API answers with is handed back byte for byte with
// its summary and cost; and a request that carries it sends it first, as
// an assistant block, byte for byte, with a cache breakpoint.
func TestServerCompactionOnTheWire(t *testing.T) {
	srv := wiretest.NewAnthropic(wiretest.Replies(
		wiretest.Reply{Compaction: &wiretest.Compaction{Block: json.RawMessage(compactionBlock)}, Text: "Answer after compaction."},
		wiretest.Reply{Text: "Next answer."},
	))
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{Model: "claude-sonnet-4-6"})
	if min, err := p.ServerCompaction(); err != nil || min != anthropic.MinCompactionTrigger {
		t.Fatalf("ServerCompaction() = %d, %v; want %d, nil for claude-sonnet-4-6", min, err, anthropic.MinCompactionTrigger)
	}
	first := []model.Message{{Role: model.RoleUser, Text: "a long conversation"}}
	resp, err := p.Complete(ctx(t), model.Request{Messages: first, CompactAt: 150_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := srv.Requests()[0]
	if got := req.Header.Values("anthropic-beta"); len(got) != 1 || got[0] != anthropic.CompactionBeta {
		t.Errorf("anthropic-beta headers %q; want [%s]", got, anthropic.CompactionBeta)
	}
	var cm struct {
		Edits []struct {
			Type    string `json:"type"`
			Trigger struct {
				Type  string `json:"type"`
				Value int    `json:"value"`
			} `json:"trigger"`
		} `json:"edits"`
	}
	if err := json.Unmarshal(req.ContextManagement, &cm); err != nil || len(cm.Edits) != 1 || cm.Edits[0].Type != "compact_20260112" ||
		cm.Edits[0].Trigger.Type != "input_tokens" || cm.Edits[0].Trigger.Value != 150_000 {
		t.Errorf("context_management %s (%v); want one compact_20260112 edit triggered at 150000 input_tokens", req.ContextManagement, err)
	}
	if resp.Text != "Answer after compaction." {
		t.Errorf("text %q", resp.Text)
	}
	c := resp.Compaction
	if c == nil {
		t.Fatal("the response carries no compaction")
	}
	if string(c.Raw) != compactionBlock {
		t.Errorf("compaction block\n got %s\nwant %s (as it arrived)", c.Raw, compactionBlock)
	}
	if c.Summary != `Summary <a & b>: the user wants é and "quotes".` {
		t.Errorf("summary %q", c.Summary)
	}
	if c.Usage.InputTokens <= 0 || c.Usage.OutputTokens <= 0 || c.Usage == resp.Usage {
		t.Errorf("compaction usage %+v, answer usage %+v; want the compaction's own figures", c.Usage, resp.Usage)
	}

	later := []model.Message{
		{Role: model.RoleAssistant, Text: "Answer after compaction."},
		{Role: model.RoleUser, Text: "go on"},
	}
	if _, err := p.Complete(ctx(t), model.Request{Messages: later, CompactAt: 150_000, Compaction: c.Raw}, nil); err != nil {
		t.Fatal(err)
	}
	req = srv.Requests()[1]
	want := withBreakpoint(c.Raw)
	if len(req.CompactionBlocks) != 1 || !bytes.Equal(req.CompactionBlocks[0], want) {
		t.Fatalf("compaction blocks sent %q; want one, the stored bytes with a breakpoint: %s", req.CompactionBlocks, want)
	}
	if !bytes.Contains(req.Body, c.Raw[:len(c.Raw)-1]) {
		t.Errorf("the body does not hold the stored block's bytes:\n%s", req.Body)
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil || len(body.Messages) != 3 || body.Messages[0].Role != "assistant" ||
		len(body.Messages[0].Content) != 1 || body.Messages[0].Content[0].Type != "compaction" {
		t.Errorf("messages %+v (%v); want the compaction first, as an assistant message, then the conversation", body.Messages, err)
	}
	if len(req.Breakpoints) == 0 || !strings.HasPrefix(req.Breakpoints[len(req.Breakpoints)-1].Where, "messages[0].content[0]") {
		t.Errorf("breakpoints %+v; want the last one on the compaction block", req.Breakpoints)
	}
}

// A compaction block that streams its summary in a compaction_delta is
// handed back as its start with the delta's members set; one whose summary
// is null (a compaction that failed, which the API ignores) is no
// compaction.
func TestServerCompactionDeltas(t *testing.T) {
	srv := wiretest.NewAnthropic(wiretest.Replies(
		wiretest.Reply{Text: "a", Compaction: &wiretest.Compaction{
			Block: json.RawMessage(`{"type":"compaction","content":null,"encrypted_content":null}`),
			Delta: json.RawMessage(`{"type":"compaction_delta","content":"Sum\nmary","encrypted_content":"RU5D"}`),
		}},
		wiretest.Reply{Text: "b", Compaction: &wiretest.Compaction{Block: json.RawMessage(`{"type":"compaction","content":null}`)}},
	))
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{Model: "claude-opus-4-6-20260205"})
	msgs := []model.Message{{Role: model.RoleUser, Text: "hi"}}
	resp, err := p.Complete(ctx(t), model.Request{Messages: msgs, CompactAt: 60_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"compaction","content":"Sum\nmary","encrypted_content":"RU5D"}`; resp.Compaction == nil || string(resp.Compaction.Raw) != want || resp.Compaction.Summary != "Sum\nmary" {
		t.Fatalf("compaction %+v; want %s", resp.Compaction, want)
	}
	resp, err = p.Complete(ctx(t), model.Request{Messages: msgs, CompactAt: 60_000}, nil)
	if err != nil || resp.Compaction != nil || resp.Text != "b" {
		t.Fatalf("after a failed compaction: %+v, %v; want the answer and no compaction", resp, err)
	}
}

// A model Anthropic does not document server-side compaction for has
// none, says which do, and a request for it fails before it is sent; so
// does a trigger below the API's least. Options.ServerCompaction turns it
// on for a later model.
func TestServerCompactionRefused(t *testing.T) {
	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{Model: "claude-sonnet-4-5"})
	_, err := p.ServerCompaction()
	if err == nil || !strings.Contains(err.Error(), "claude-opus-4-6 and claude-sonnet-4-6") {
		t.Fatalf("ServerCompaction() for claude-sonnet-4-5: %v; want it refused, naming the models that have it", err)
	}
	if _, err := model.ServerCompaction(p); err == nil {
		t.Fatal("model.ServerCompaction agrees with the provider: want an error")
	}
	msgs := []model.Message{{Role: model.RoleUser, Text: "hi"}}
	if _, err := p.Complete(ctx(t), model.Request{Messages: msgs, CompactAt: 100_000}, nil); err == nil || !strings.Contains(err.Error(), "server-side compaction") {
		t.Fatalf("CompactAt on claude-sonnet-4-5: %v; want an error", err)
	}
	on := true
	later := newProvider(t, srv, anthropic.Options{Model: "claude-sonnet-4-7", ServerCompaction: &on})
	if _, err := later.ServerCompaction(); err != nil {
		t.Fatalf("ServerCompaction with the option set: %v", err)
	}
	if _, err := later.Complete(ctx(t), model.Request{Messages: msgs, CompactAt: 1000}, nil); err == nil || !strings.Contains(err.Error(), "50000") {
		t.Fatalf("a trigger of 1000 tokens: %v; want it refused, naming the least", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached the server; want none", n)
	}
	for _, name := range []string{"claude-opus-4-6", "claude-sonnet-4-6-20260217", "CLAUDE-SONNET-4-6"} {
		if _, err := newProvider(t, srv, anthropic.Options{Model: name}).ServerCompaction(); err != nil {
			t.Errorf("%s: %v; want server-side compaction", name, err)
		}
	}
	for _, name := range []string{"claude-sonnet-4-60", "claude-opus-4-5", "claude-haiku-4-5"} {
		if _, err := newProvider(t, srv, anthropic.Options{Model: name}).ServerCompaction(); err == nil {
			t.Errorf("%s: want no server-side compaction", name)
		}
	}
}
