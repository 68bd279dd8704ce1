package runtime

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
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

// randomHistory builds a history of n messages mixing user text, replies,
// turns of up to three calls, results in time, late, twice or never.
func randomHistory(rng *rand.Rand, n int) []store.Message {
	var h []store.Message
	var open []string // calls without a result yet
	next := 0
	for len(h) < n {
		switch k := rng.IntN(10); {
		case k < 2:
			h = append(h, user(fmt.Sprintf("u%d", len(h))))
		case k < 3:
			h = append(h, asst(fmt.Sprintf("t%d", len(h))))
		case k < 6:
			var ids []string
			for range 1 + rng.IntN(3) {
				next++
				ids = append(ids, fmt.Sprintf("c%d", next))
			}
			open = append(open, ids...)
			h = append(h, asst("", ids...))
		default:
			if len(open) == 0 {
				h = append(h, user(fmt.Sprintf("u%d", len(h))))
				continue
			}
			i := rng.IntN(len(open))
			h = append(h, res(open[i], fmt.Sprintf("r%d", len(h))))
			if rng.IntN(8) > 0 { // sometimes a result comes twice
				open = append(open[:i], open[i+1:]...)
			}
		}
	}
	return h
}

// Arranging from the settled prefix of an earlier completion gives exactly
// what arranging the whole history gives, whatever was appended since and
// whichever placeholders apply now; what the caller does with the messages
// it got never changes the next arrangement.
func TestArrangeFromSettledPrefix(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := randomHistory(rng, 5+rng.IntN(60))
		// Some results are cut to their note (bounds.go).
		view := modelView{images: rng.IntN(2) == 0, maxResultTokens: []int{0, 2}[rng.IntN(2)]}
		var prev *arranged
		for k := 0; k <= len(h); k += 1 + rng.IntN(4) {
			more := h[k:min(len(h), k+rng.IntN(3))]
			auth := map[string]bool{}
			for i := range 40 {
				if rng.IntN(3) == 0 {
					auth[fmt.Sprintf("c%d", i)] = true
				}
			}
			hist := joined{h[:k:k], more}
			want := arrangeHistoryWith(hist, view, placeholderFor(auth, nil))
			got, next := arrangeFrom(hist, view, placeholderFor(auth, nil), prev)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, %d saved + %d new messages:\nfrom the settled prefix %s\nfrom the start         %s",
					seed, k, len(more), render(got), render(want))
			}
			if next != nil && next.upto > k {
				t.Fatalf("seed %d: the settled prefix covers %d messages of %d saved", seed, next.upto, k)
			}
			// The caller owns what it got.
			for i := range got {
				got[i].Text += " changed"
				got[i].Role = model.RoleAssistant
			}
			prev = next
		}
	}
}

// A history that grows by one closed turn per completion settles all but
// its last turn, so each completion arranges only what is new.
func TestArrangeFromSettlesClosedTurns(t *testing.T) {
	h := []store.Message{user("go")}
	var prev *arranged
	for i := range 50 {
		id := fmt.Sprintf("c%d", i)
		h = append(h, asst("", id))
		_, prev = arrangeFrom(joined{h, []store.Message{res(id, "r")}}, modelView{}, nil, prev)
		h = append(h, res(id, "r"))
		if prev == nil || prev.upto != len(h)-2 {
			t.Fatalf("turn %d: settled %+v of %d messages, want all but the last turn", i, prev, len(h))
		}
	}
}
