package model_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gorap/gorap/model"
)

// numberedLines returns about size bytes of lines "line N of a long tool
// result\n".
func numberedLines(size int) string {
	var b strings.Builder
	for i := 1; b.Len() < size; i++ {
		fmt.Fprintf(&b, "line %d of a long tool result\n", i)
	}
	return b.String()
}

var noteRE = regexp.MustCompile(`\[… ([0-9,]+) bytes \(about ([0-9,]+) tokens\) of this result left out: the whole result is kept in the thread's history, but only its start and its end fit in the model's context; ask the tool for less, such as a range or a filter …\]`)

// A text over the bound is sent as its start and its end, cut at line
// breaks, with a note that counts the bytes and tokens left out exactly;
// the whole is estimated within the bound, the start takes about twice
// the tokens of the end, and the same text is always cut the same way.
func TestBoundTextKeepsStartAndEnd(t *testing.T) {
	text := numberedLines(2 << 20)
	const limit = 800
	out := model.BoundText(text, limit)
	if got := model.EstimateTokens(out); got > limit {
		t.Fatalf("bounded text is estimated at %d tokens, over the bound of %d", got, limit)
	}
	m := noteRE.FindStringSubmatchIndex(out)
	if m == nil {
		t.Fatalf("no note in the bounded text:\n%s", out)
	}
	head, tail := out[:m[0]], out[m[1]:]
	if !strings.HasPrefix(head, "line 1 of") || !strings.HasSuffix(head, "result\n\n") && !strings.HasSuffix(head, "result\n") {
		t.Errorf("head does not end at a line break:\n%q", head)
	}
	if !strings.HasPrefix(tail, "\nline ") || !strings.HasSuffix(text, tail[1:]) {
		t.Errorf("tail is not whole lines ending the text:\n%q", tail)
	}
	if !strings.HasPrefix(text, head) {
		t.Errorf("head is not the start of the text")
	}
	left := len(text) - len(head) - (len(tail) - 1)
	if n := digits(out[m[2]:m[3]]); n != left {
		t.Errorf("note says %d bytes left out, %d were", n, left)
	}
	if n, want := digits(out[m[4]:m[5]]), model.EstimateTokens(text[len(head):len(text)-len(tail)+1]); n != want {
		t.Errorf("note says about %d tokens left out, the estimate is %d", n, want)
	}
	h, tl := model.EstimateTokens(head), model.EstimateTokens(tail)
	if h < tl || h > 3*tl {
		t.Errorf("head %d tokens, tail %d: want about two thirds and one third", h, tl)
	}
	if again := model.BoundText(text, limit); again != out {
		t.Errorf("the same text was cut differently")
	}
}

func digits(s string) int {
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		panic(err)
	}
	return n
}

// A text within the bound is returned as it is, up to the last token; a
// bound of 0 or less bounds nothing.
func TestBoundTextWithinTheBound(t *testing.T) {
	text := numberedLines(40_000)
	n := model.EstimateTokens(text)
	if got := model.BoundText(text, n); got != text {
		t.Errorf("a text of exactly the bound (%d tokens) was cut", n)
	}
	if got := model.BoundText(text, n-1); got == text || !noteRE.MatchString(got) {
		t.Errorf("a text one token over the bound was not cut")
	}
	if got := model.BoundText(text, 0); got != text {
		t.Errorf("bound 0 cut the text")
	}
}

// The text parts of a result are bounded as one text: the images stay
// where they are, a part left out entirely is dropped, and the caller's
// Content is not modified; a result within the bound is returned as it is.
func TestBoundResultContent(t *testing.T) {
	img := model.ContentPart{Type: "image", Data: "aGk=", MediaType: "image/png"}
	content := []model.ContentPart{
		{Type: "text", Text: "first " + numberedLines(100_000)},
		img,
		{Type: "text", Text: "middle " + numberedLines(100_000)},
		img,
		{Type: "text", Text: "last " + numberedLines(100_000)},
	}
	orig := append([]model.ContentPart(nil), content...)
	r := model.BoundResult(model.ToolResult{CallID: "c", Content: content, IsError: true}, 1000)
	if !reflect.DeepEqual(content, orig) {
		t.Fatal("BoundResult modified the caller's content")
	}
	if r.CallID != "c" || !r.IsError {
		t.Errorf("call id or error flag lost: %+v", r)
	}
	var kinds []string
	total := 0
	for _, c := range r.Content {
		kinds = append(kinds, c.Type)
		total += model.EstimateTokens(c.Text)
	}
	if want := []string{"text", "image", "image", "text"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("parts %v, want %v (the middle text left out)", kinds, want)
	}
	if total > 1000 {
		t.Errorf("text parts estimated at %d tokens, over the bound", total)
	}
	if !strings.HasPrefix(r.Content[0].Text, "first line 1 ") || !noteRE.MatchString(r.Content[0].Text) {
		t.Errorf("first part: %.200q…", r.Content[0].Text)
	}
	if !strings.HasSuffix(content[4].Text, r.Content[3].Text) {
		t.Errorf("last part is not the end of the last text")
	}

	small := model.ToolResult{CallID: "c", Content: []model.ContentPart{{Type: "text", Text: "ok"}, img}}
	if got := model.BoundResult(small, 10); !reflect.DeepEqual(got, small) {
		t.Errorf("a small result changed: %+v", got)
	}
	plain := model.BoundResult(model.ToolResult{CallID: "c", Text: numberedLines(50_000)}, 500)
	if !noteRE.MatchString(plain.Text) || model.EstimateTokens(plain.Text) > 500 {
		t.Errorf("a plain text result was not bounded")
	}
}

// Whatever the text, a bound at least the note's size holds, the output
// is valid UTF-8 when the input is, starts with a prefix of the input and
// ends with a suffix of it.
func TestBoundTextAnyText(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"word ", "x", "Q", "42", "\n", "{\"k\": ", "é", "日本", "한", "Я", "😀", "aGVsbG8gd29ybGQ="}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(3000) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := b.String()
		limit := 120 + rng.IntN(400)
		out := model.BoundText(text, limit)
		if out == text {
			if model.EstimateTokens(text) > limit {
				t.Fatalf("a text over the bound was not cut")
			}
			continue
		}
		if got := model.EstimateTokens(out); got > limit {
			t.Fatalf("bound %d: estimated %d tokens", limit, got)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("bound %d: invalid UTF-8 out of valid text", limit)
		}
		m := noteRE.FindStringIndex(out)
		if m == nil {
			t.Fatalf("bound %d: no note", limit)
		}
		head, tail := strings.TrimSuffix(out[:m[0]], "\n"), strings.TrimPrefix(out[m[1]:], "\n")
		if !strings.HasPrefix(text, head) || !strings.HasSuffix(text, tail) || len(head)+len(tail) >= len(text) {
			t.Fatalf("bound %d: head and tail are not the text's start and end", limit)
		}
	}
}
