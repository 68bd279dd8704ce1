package model

// This file owns bounding a tool result for a model's context: a result
// whose text is estimated (EstimateTokens) to take more tokens than
// allowed is sent as its start and its end, with a note in between saying
// how much was left out.

import (
	"fmt"
	"strconv"
	"strings"
)

// BoundText returns text when its estimated tokens are at most maxTokens
// (or maxTokens is not positive), and otherwise its start and its end,
// about two thirds and one third of maxTokens, with a note between them
// saying how many bytes and tokens were left out. The cut falls on a
// character boundary, on a line boundary when one is near, and depends on
// nothing but text and maxTokens: the same text is always cut the same
// way. What it returns is estimated at most maxTokens, or just the note
// when maxTokens is smaller than the note.
func BoundText(text string, maxTokens int) string {
	out, _ := boundTexts([]string{text}, maxTokens)
	return out[0]
}

// BoundResult returns r with its text bounded as BoundText bounds it: its
// Text, or the text parts of its Content taken as one text (images are
// kept where they are; a text part left out entirely is dropped). r's
// Content is never modified: a bounded result has a copy.
func BoundResult(r ToolResult, maxTokens int) ToolResult {
	if maxTokens <= 0 {
		return r
	}
	if len(r.Content) == 0 {
		r.Text = BoundText(r.Text, maxTokens)
		return r
	}
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	bounded, cut := boundTexts(texts, maxTokens)
	if !cut {
		return r
	}
	content := make([]ContentPart, 0, len(r.Content))
	k := 0
	for _, c := range r.Content {
		if c.Type == "text" {
			text := bounded[k]
			k++
			if text == "" && texts[k-1] != "" {
				continue // left out entirely
			}
			c.Text = text
		}
		content = append(content, c)
	}
	r.Content = content
	return r
}

// boundTexts bounds texts, read as one text in order, to maxTokens (see
// BoundText). It returns texts itself when nothing was cut; otherwise a
// new slice of the same length, in which a text left out entirely is "".
func boundTexts(texts []string, maxTokens int) ([]string, bool) {
	if maxTokens <= 0 {
		return texts, false
	}
	budget := maxTokens * unitsPerToken
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	if size*maxUnitsPerByte <= budget {
		return texts, false // fits whatever it holds
	}
	units := make([]int, len(texts))
	total := 0
	for i, t := range texts {
		_, units[i] = prefixWithin(t, -1)
		total += units[i]
	}
	if total <= budget {
		return texts, false
	}
	// Room for the note: its numbers are at most the whole text's.
	keep := max(budget-noteUnits(size, ceilTokens(total)), 0)
	headBudget := keep * 2 / 3
	tailBudget := keep - headBudget

	// The head: whole texts while they fit, then the start of text h.
	h := 0
	for h < len(texts) && units[h] <= headBudget {
		headBudget -= units[h]
		h++
	}
	// total > keep, so some text does not fit whole: h < len(texts).
	headEnd, _ := prefixWithin(texts[h], headBudget)
	headEnd = lineEndBefore(texts[h], headEnd)
	// The tail: whole texts from the end while they fit, then the end of
	// text t, never reaching back into the head.
	t := len(texts) - 1
	for t > h && units[t] <= tailBudget {
		tailBudget -= units[t]
		t--
	}
	from := 0
	if t == h {
		from = headEnd
	}
	tailStart, _ := suffixWithin(texts[t][from:], tailBudget)
	tailStart = lineStartAfter(texts[t], from+tailStart)

	// What is left out: texts[h][headEnd:], the texts between h and t, and
	// texts[t][:tailStart] (one stretch when h == t).
	var gapBytes, gapUnits int
	gap := func(s string) {
		_, u := prefixWithin(s, -1)
		gapBytes += len(s)
		gapUnits += u
	}
	if t == h {
		gap(texts[h][headEnd:tailStart])
	} else {
		gap(texts[h][headEnd:])
		for _, s := range texts[h+1 : t] {
			gap(s)
		}
		gap(texts[t][:tailStart])
	}
	note := omittedNote(gapBytes, ceilTokens(gapUnits))
	out := make([]string, len(texts))
	copy(out, texts)
	head := texts[h][:headEnd]
	if head != "" && !strings.HasSuffix(head, "\n") {
		head += "\n"
	}
	if t == h {
		out[h] = head + note + "\n" + texts[h][tailStart:]
		return out, true
	}
	out[h] = head + note
	for i := h + 1; i < t; i++ {
		out[i] = ""
	}
	out[t] = texts[t][tailStart:]
	return out, true
}

// lineEndBefore moves a cut at end of s back to just after a line break in
// the last eighth before it, when there is one.
func lineEndBefore(s string, end int) int {
	if i := strings.LastIndexByte(s[end-end/8:end], '\n'); i >= 0 {
		return end - end/8 + i + 1
	}
	return end
}

// lineStartAfter moves a cut at start of s forward to just after a line
// break in the first eighth of what follows it, when there is one.
func lineStartAfter(s string, start int) int {
	if i := strings.IndexByte(s[start:start+(len(s)-start)/8], '\n'); i >= 0 {
		return start + i + 1
	}
	return start
}

func ceilTokens(units int) int { return (units + unitsPerToken - 1) / unitsPerToken }

// omittedNote is the note put where a result's middle was left out.
func omittedNote(bytes, tokens int) string {
	return fmt.Sprintf("[… %s bytes (about %s tokens) of this result left out: the whole result is kept in the thread's history, but only its start and its end fit in the model's context; ask the tool for less, such as a range or a filter …]",
		groupThousands(bytes), groupThousands(tokens))
}

// noteUnits is the cost of the note and its two line breaks.
func noteUnits(bytes, tokens int) int {
	_, u := prefixWithin(omittedNote(bytes, tokens), -1)
	return u + 2*spaceUnits
}

// groupThousands writes n, not negative, with commas between groups of
// three digits: 1,234,567.
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
