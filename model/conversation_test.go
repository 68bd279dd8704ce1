package model_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
)

// Shorthands for the tables below.
func user(text string, results ...model.ToolResult) model.Message {
	return model.Message{Role: model.RoleUser, Text: text, ToolResults: results}
}

func assistant(text string, calls ...model.ToolCall) model.Message {
	return model.Message{Role: model.RoleAssistant, Text: text, ToolCalls: calls}
}

func call(id, name string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(`{}`)}
}

func result(id, text string) model.ToolResult { return model.ToolResult{CallID: id, Text: text} }

func pending(id string) model.ToolResult {
	return model.ToolResult{CallID: id, Text: model.PendingResultText}
}

func text(s string) model.ContentPart { return model.ContentPart{Type: "text", Text: s} }

func aTurn(text string, calls ...model.ToolCall) model.Turn {
	return model.Turn{Role: model.RoleAssistant, Text: text, ToolCalls: calls}
}

func uTurn(results []model.ToolResult, content ...model.ContentPart) model.Turn {
	return model.Turn{Role: model.RoleUser, ToolResults: results, Content: content}
}

const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

func TestNormalize(t *testing.T) {
	errResult := model.ToolResult{CallID: "b", Text: "Error: no such file; pass an existing path", IsError: true}
	multi := model.ToolResult{CallID: "a", Content: []model.ContentPart{text("one"), text("uno")}}
	image := model.ToolResult{CallID: "s", Content: []model.ContentPart{text("Here it is"), {Type: "image", Data: png, MediaType: "image/png"}}}
	cases := []struct {
		name string
		in   []model.Message
		want []model.Turn
	}{
		{
			name: "plain text passes through",
			in:   []model.Message{user("Hi")},
			want: []model.Turn{uTurn(nil, text("Hi"))},
		},
		{
			// RAP RE-1, RE-4: results, errors included, are linked to their
			// calls and placed in call order.
			name: "results in call order",
			in: []model.Message{
				user("Do two things"),
				assistant("On it.", call("a", "first"), call("b", "second")),
				user("", errResult, multi),
			},
			want: []model.Turn{
				uTurn(nil, text("Do two things")),
				aTurn("On it.", call("a", "first"), call("b", "second")),
				uTurn([]model.ToolResult{multi, errResult}),
			},
		},
		{
			// RAP RT-3: the user speaks while a tool runs; the open call is
			// answered with the pending note and the late result becomes
			// text headed by its call id and tool name.
			name: "pending then late result",
			in: []model.Message{
				user("Start the build"),
				assistant("", call("build1", "build")),
				user("How is it going?"),
				assistant("Still running."),
				user("", result("build1", "build ok")),
			},
			want: []model.Turn{
				uTurn(nil, text("Start the build")),
				aTurn("", call("build1", "build")),
				uTurn([]model.ToolResult{pending("build1")}, text("How is it going?")),
				aTurn("Still running."),
				uTurn(nil, text("Result of the earlier call build1 to tool build:"), text("build ok")),
			},
		},
		{
			name: "late error result says so",
			in: []model.Message{
				assistant("", call("c1", "t")),
				user("stop"),
				assistant("ok"),
				user("", model.ToolResult{CallID: "c1", Text: "Error: gone", IsError: true}),
			},
			want: []model.Turn{
				aTurn("", call("c1", "t")),
				uTurn([]model.ToolResult{pending("c1")}, text("stop")),
				aTurn("ok"),
				uTurn(nil, text("Result of the earlier call c1 to tool t:"), text(model.ErrorResultNote), text("Error: gone")),
			},
		},
		{
			name: "result for a call never seen",
			in:   []model.Message{user("hi", result("ghost", "boo"))},
			want: []model.Turn{uTurn(nil, text("Result of the earlier tool call ghost:"), text("boo"), text("hi"))},
		},
		{
			name: "late image result keeps its image",
			in:   []model.Message{user("look", image)},
			want: []model.Turn{uTurn(nil, text("Result of the earlier tool call s:"), image.Content[0], image.Content[1], text("look"))},
		},
		{
			name: "conversation ends with open calls",
			in:   []model.Message{user("go"), assistant("", call("x", "t"), call("y", "t"))},
			want: []model.Turn{
				uTurn(nil, text("go")),
				aTurn("", call("x", "t"), call("y", "t")),
				uTurn([]model.ToolResult{pending("x"), pending("y")}),
			},
		},
		{
			name: "assistant messages around an empty user message merge",
			in:   []model.Message{assistant("", call("x", "t")), user(""), assistant("more")},
			want: []model.Turn{
				aTurn("more", call("x", "t")),
				uTurn([]model.ToolResult{pending("x")}),
			},
		},
		{
			name: "consecutive roles merge and empty messages go",
			in: []model.Message{
				user("a"), {Role: model.RoleUser}, user("b"),
				assistant("c", call("1", "t")), assistant("", call("2", "u")), {Role: model.RoleAssistant},
				user("", result("2", "two")), user("", result("1", "one")), user("d"),
			},
			want: []model.Turn{
				uTurn(nil, text("a\n\nb")),
				aTurn("c", call("1", "t"), call("2", "u")),
				uTurn([]model.ToolResult{result("1", "one"), result("2", "two")}, text("d")),
			},
		},
		{
			// RAP RE-6: a redelivered result reaches the model once.
			name: "redelivered result in one message",
			in:   []model.Message{assistant("", call("1", "t")), user("", result("1", "r"), result("1", "r"))},
			want: []model.Turn{aTurn("", call("1", "t")), uTurn([]model.ToolResult{result("1", "r")})},
		},
		{
			// RAP RE-6, across messages: the copy that comes after the
			// conversation moved on is dropped, not shown as a late result,
			// and the user turn it stood alone in goes with it.
			name: "redelivered result in a later message",
			in: []model.Message{
				assistant("", call("1", "t")), user("", result("1", "r")),
				assistant("done"), user("", result("1", "r")), user("thanks"),
			},
			want: []model.Turn{
				aTurn("", call("1", "t")), uTurn([]model.ToolResult{result("1", "r")}),
				aTurn("done"), uTurn(nil, text("thanks")),
			},
		},
		{
			// Two different results for one call: the first answers it, the
			// second is kept as text rather than lost.
			name: "second different result for one call",
			in:   []model.Message{assistant("", call("1", "t")), user("", result("1", "first"), result("1", "second"))},
			want: []model.Turn{
				aTurn("", call("1", "t")),
				uTurn([]model.ToolResult{result("1", "first")}, text("Result of the earlier call 1 to tool t:"), text("second")),
			},
		},
		{
			name: "an error flag makes a different result",
			in: []model.Message{
				assistant("", call("1", "t")),
				user("", result("1", "x"), model.ToolResult{CallID: "1", Text: "x", IsError: true}),
			},
			want: []model.Turn{
				aTurn("", call("1", "t")),
				uTurn([]model.ToolResult{result("1", "x")}, text("Result of the earlier call 1 to tool t:"), text(model.ErrorResultNote), text("x")),
			},
		},
		{
			name: "nothing to say",
			in:   []model.Message{{Role: model.RoleUser}, {Role: model.RoleAssistant}},
			want: []model.Turn{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := clone(t, tc.in)
			got, err := model.Normalize(tc.in)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Normalize =\n%s\nwant\n%s", dump(got), dump(tc.want))
			}
			if !reflect.DeepEqual(tc.in, in) {
				t.Errorf("Normalize modified its input:\n%s\nwas\n%s", dump(tc.in), dump(in))
			}
		})
	}
}

// Bad input is refused with an error that names the message and says what
// to do; nothing is half converted.
func TestNormalizeBadInput(t *testing.T) {
	cases := []struct {
		name string
		in   []model.Message
		want string
	}{
		{"system role", []model.Message{user("ok"), {Role: "system", Text: "x"}}, `messages[1]: role "system" is neither "user" nor "assistant"`},
		{"tool role", []model.Message{{Role: "tool", Text: "x"}}, `messages[0]: role "tool"`},
		{"results in assistant", []model.Message{{Role: model.RoleAssistant, ToolResults: []model.ToolResult{result("1", "r")}}},
			"messages[0]: an assistant message carries tool results; put them in a user message"},
		{"calls in user", []model.Message{user("x"), {Role: model.RoleUser, ToolCalls: []model.ToolCall{call("1", "t")}}},
			"messages[1]: a user message carries tool calls; put them in an assistant message"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := model.Normalize(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v; want it to contain %q", err, tc.want)
			}
			if got != nil {
				t.Errorf("turns = %+v alongside the error; want none", got)
			}
		})
	}
}

// The shape every provider relies on holds for any conversation: roles
// alternate, each assistant turn's calls are answered one for one and in
// order by the next user turn, no turn is empty, and every text, result
// and image of the input is still there.
func TestNormalizeInvariants(t *testing.T) {
	for seed := range 2000 {
		msgs, markers := conversation(seed)
		turns, err := model.Normalize(msgs)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		all := dump(turns)
		for _, m := range markers {
			if strings.Count(all, m) != 1 {
				t.Fatalf("seed %d: %q appears %d times in\n%s", seed, m, strings.Count(all, m), all)
			}
		}
		for i, tn := range turns {
			if i > 0 && turns[i-1].Role == tn.Role {
				t.Fatalf("seed %d: turns %d and %d are both %s", seed, i-1, i, tn.Role)
			}
			if tn.Text == "" && len(tn.ToolCalls) == 0 && len(tn.ToolResults) == 0 && len(tn.Content) == 0 {
				t.Fatalf("seed %d: turn %d is empty", seed, i)
			}
			var want []string
			if i > 0 {
				for _, c := range turns[i-1].ToolCalls {
					want = append(want, c.ID)
				}
			}
			var got []string
			for _, r := range tn.ToolResults {
				got = append(got, r.CallID)
			}
			if tn.Role == model.RoleUser && !slices.Equal(got, want) {
				t.Fatalf("seed %d: turn %d answers %v, want %v", seed, i, got, want)
			}
		}
		if last := turns[len(turns)-1]; last.Role == model.RoleAssistant && len(last.ToolCalls) > 0 {
			t.Fatalf("seed %d: the last turn leaves calls unanswered", seed)
		}
	}
}

// conversation builds a pseudo-random conversation with unique markers in
// every text and result.
func conversation(seed int) ([]model.Message, []string) {
	state := uint32(seed)*2654435761 + 1
	next := func(n int) int {
		state ^= state << 13
		state ^= state >> 17
		state ^= state << 5
		return int(state % uint32(n))
	}
	var (
		msgs    = []model.Message{user(fmt.Sprintf("#start-%d#", seed))}
		markers = []string{fmt.Sprintf("#start-%d#", seed)}
		calls   []string
	)
	for i := range 1 + next(12) {
		switch next(6) {
		case 0:
			m := fmt.Sprintf("#user-%d#", i)
			markers = append(markers, m)
			msgs = append(msgs, user(m))
		case 1:
			m := fmt.Sprintf("#assistant-%d#", i)
			markers = append(markers, m)
			msgs = append(msgs, assistant(m))
		case 2:
			id := fmt.Sprintf("call-%d", i)
			calls = append(calls, id)
			msgs = append(msgs, assistant("", call(id, "tool")))
		case 3:
			id := fmt.Sprintf("ghost-%d", i)
			if len(calls) > 0 && next(4) > 0 {
				id = calls[next(len(calls))]
			}
			m := fmt.Sprintf("#result-%d#", i)
			markers = append(markers, m)
			r := model.ToolResult{CallID: id, Text: m, IsError: next(2) == 0}
			msgs = append(msgs, user("", r))
			if next(3) == 0 { // redelivered
				msgs = append(msgs, user("", r))
			}
		case 4:
			msgs = append(msgs, model.Message{Role: []model.Role{model.RoleUser, model.RoleAssistant}[next(2)]})
		case 5:
			m := fmt.Sprintf("#image-%d#", i)
			markers = append(markers, m)
			msgs = append(msgs, user("", model.ToolResult{CallID: "img", Content: []model.ContentPart{{Type: "image", Data: m, MediaType: "image/png"}}}))
		}
	}
	return msgs, markers
}

func TestImagePlaceholder(t *testing.T) {
	got := model.ImagePlaceholder(model.ContentPart{Type: "image", Data: png, MediaType: "image/png"}, "this model does not accept images")
	if got != "[image omitted (image/png, about 70 bytes): this model does not accept images]" {
		t.Errorf("placeholder = %q", got)
	}
	if strings.Contains(got, png[:16]) {
		t.Error("the placeholder carries image bytes (RAP RE-2)")
	}
	if got := model.ImagePlaceholder(model.ContentPart{Type: "image"}, "no data"); got != "[image omitted (unknown type, about 0 bytes): no data]" {
		t.Errorf("empty image placeholder = %q", got)
	}
}

func TestToolResultText(t *testing.T) {
	r := model.ToolResult{CallID: "1", Text: "fallback"}
	if got := r.Parts(); len(got) != 1 || got[0] != text("fallback") {
		t.Errorf("Parts of a text result = %+v", got)
	}
	if got := r.PlainText(); got != "fallback" {
		t.Errorf("PlainText = %q", got)
	}
	r.Content = []model.ContentPart{text("a"), {Type: "image", Data: png, MediaType: "image/png"}, text("b")}
	if got := r.Parts(); len(got) != 3 || got[1].Type != "image" {
		t.Errorf("Parts = %+v; want Content", got)
	}
	if got := r.PlainText(); got != "a\nb" {
		t.Errorf("PlainText = %q; want the text parts joined, images left out", got)
	}
}

func BenchmarkNormalize(b *testing.B) {
	var msgs []model.Message
	msgs = append(msgs, user("start"))
	for i := range 100 {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			assistant("calling", call(id, "tool")),
			user("", result(id, strings.Repeat("result ", 50))))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := model.Normalize(msgs); err != nil {
			b.Fatal(err)
		}
	}
}

func clone(t *testing.T, msgs []model.Message) []model.Message {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Message
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out == nil {
		return msgs
	}
	return out
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
