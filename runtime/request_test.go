package runtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

func user(text string) store.Message { return store.Message{Role: store.RoleUser, Text: text} }
func asst(text string, ids ...string) store.Message {
	m := store.Message{Role: store.RoleAssistant, Text: text}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, store.ToolCall{ID: id, Name: "tool_" + id, Arguments: json.RawMessage(`{}`)})
	}
	return m
}
func res(id, text string) store.Message {
	return store.Message{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: id, Name: "tool_" + id, Text: text}}}
}

// render shows a request compactly: role letter, text, [calls], {results}.
func render(msgs []model.Message) string {
	var parts []string
	for _, m := range msgs {
		s := string(m.Role[0]) + ":" + m.Text
		for _, c := range m.ToolCalls {
			s += "[" + c.ID + "]"
		}
		for _, r := range m.ToolResults {
			t := r.Text
			if t == pendingResultText {
				t = "PENDING"
			}
			s += "{" + r.CallID + "=" + t + "}"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " | ")
}

// The history sent to a model always answers each call in the next
// message and alternates roles, wherever results arrived (RAP RT-3).
func TestArrangeHistory(t *testing.T) {
	cases := []struct {
		name    string
		history []store.Message
		want    string
	}{
		{"results in time",
			[]store.Message{user("go"), asst("", "a", "b"), res("b", "B"), res("a", "A"), asst("done")},
			"u:go | a:[a][b] | u:{a=A}{b=B} | a:done"},
		{"pending call gets a placeholder",
			[]store.Message{user("go"), asst("", "a"), user("status?")},
			"u:go | a:[a] | u:status?{a=PENDING}"},
		{"late result becomes a note where it arrived",
			[]store.Message{user("go"), asst("", "a"), user("status?"), asst("waiting"), res("a", "A")},
			"u:go | a:[a] | u:status?{a=PENDING} | a:waiting | u:Result of the earlier call a (tool_a), which arrived after the conversation moved on:\nA"},
		{"a late result among the results of a later turn",
			[]store.Message{user("go"), asst("", "a"), user("more"), asst("", "b"), res("b", "B"), res("a", "A")},
			"u:go | a:[a] | u:more{a=PENDING} | a:[b] | u:Result of the earlier call a (tool_a), which arrived after the conversation moved on:\nA{b=B}"},
		{"consecutive user messages merge",
			[]store.Message{user("one"), user("two")},
			"u:one\n\ntwo"},
		{"injected event after a text-only reply",
			[]store.Message{user("go"), asst("ok"), asst("", "ev"), res("ev", "E")},
			"u:go | a:ok[ev] | u:{ev=E}"},
		{"empty replies are left out",
			[]store.Message{user("one"), asst(""), user("two")},
			"u:one\n\ntwo"},
		{"rejected and accepted calls of one turn",
			[]store.Message{user("go"), asst("", "bad", "good"), res("bad", "Error: no"), res("good", "G")},
			"u:go | a:[bad][good] | u:{bad=Error: no}{good=G}"},
	}
	for _, c := range cases {
		got := arrangeHistory(c.history, false)
		if r := render(got); r != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, r, c.want)
		}
		if err := validAlternation(got); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// RAP RE-2: images reach a model that accepts them; otherwise each becomes
// a placeholder and no image bytes are sent.
func TestArrangeHistoryImages(t *testing.T) {
	h := []store.Message{user("snap"), asst("", "a"), {Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: "a",
		Content: []rap.ContentItem{rap.TextContent("caption"), rap.ImageContent("QUJD", "image/png")}}}}}
	with := arrangeHistory(h, true)[2].ToolResults[0]
	if len(with.Content) != 2 || with.Content[1].Data != "QUJD" || with.Content[1].MediaType != "image/png" {
		t.Fatalf("with images: %+v", with)
	}
	without := arrangeHistory(h, false)[2].ToolResults[0]
	if len(without.Content) != 0 || strings.Contains(without.Text, "QUJD") || !strings.Contains(without.Text, "caption") || !strings.Contains(without.Text, "image/png") {
		t.Fatalf("without images: %+v", without)
	}
}

// A batch of results wakes the model only when some turn has all its
// results; user messages and events always do.
func TestNeedsCompletion(t *testing.T) {
	calls := []store.Call{
		{CallID: "a1", TurnSeq: 2, State: store.CallDone}, {CallID: "a2", TurnSeq: 2, State: store.CallDispatched},
		{CallID: "b1", TurnSeq: 5, State: store.CallDone},
	}
	r := func(ids ...string) *batch {
		b := &batch{ids: []int64{1}}
		for _, id := range ids {
			b.results = append(b.results, store.ToolResult{CallID: id})
		}
		return b
	}
	cases := []struct {
		name string
		b    *batch
		want bool
	}{
		{"one of two results", r("a1"), false},
		{"both results", r("a1", "a2"), true},
		{"the only result of another turn", r("b1"), true},
		{"a complete turn and an incomplete one", r("a1", "b1"), true},
		{"a result of no recorded call", r("zz"), true},
		{"a user message", &batch{ids: []int64{1}, users: []store.Message{user("hi")}}, true},
		{"nothing decodable", &batch{ids: []int64{1}}, false},
	}
	known := map[string]store.Call{}
	var pending []store.Call
	for _, c := range calls {
		known[c.CallID] = c
		if c.State.Pending() {
			pending = append(pending, c)
		}
	}
	for _, c := range cases {
		if got := needsCompletion(c.b, pending, known); got != c.want {
			t.Errorf("%s: needsCompletion = %v, want %v", c.name, got, c.want)
		}
	}
}
