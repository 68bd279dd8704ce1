package store

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ThreadFilter selects threads for FindThreads. Each thread is judged by
// its session: the Title, FirstMessage and Archived flag of its root
// thread (a root thread is its own). The zero value selects every thread.
type ThreadFilter struct {
	// ParentID, when set, selects only that thread's children.
	ParentID string
	// UserID, when set, selects only the threads of that user's sessions
	// (Thread.UserID). Not together with ParentID.
	UserID string
	// Search, when it has words (split at white space), selects the
	// threads of sessions whose Title or FirstMessage holds every one of
	// them, ignoring case (SearchFold): "deploy db" finds "DB deploy
	// failed". The words are plain text: % and _ match only themselves.
	Search string
	// Archived says what to do with archived sessions.
	Archived ArchivedFilter
}

// ArchivedFilter says which sessions a ThreadFilter selects by their
// Archived flag.
type ArchivedFilter int

// ArchivedFilter values.
const (
	// ArchivedIncluded selects sessions whether archived or not.
	ArchivedIncluded ArchivedFilter = iota
	// ArchivedExcluded leaves archived sessions out.
	ArchivedExcluded
	// ArchivedOnly selects archived sessions only.
	ArchivedOnly
)

// MaxFirstMessage is how many characters (runes) of a session's first
// user message FirstMessageOf keeps.
const MaxFirstMessage = 500

// FirstMessageOf returns what a root thread keeps as its FirstMessage of
// the text of the session's first user message: the text without leading
// and trailing white space, cut after MaxFirstMessage characters, with
// invalid UTF-8 and NUL bytes dropped (so that every store can search it
// as text).
func FirstMessageOf(text string) string {
	text = strings.ToValidUTF8(text, "")
	text = strings.ReplaceAll(text, "\x00", "")
	text = strings.TrimSpace(text)
	if utf8.RuneCountInString(text) <= MaxFirstMessage {
		return text
	}
	n := 0
	for i := range text {
		if n == MaxFirstMessage {
			return strings.TrimSpace(text[:i])
		}
		n++
	}
	return text
}

// SearchFold returns s as ThreadFilter.Search compares it: lower case,
// each run of white space or control characters one space, without
// leading or trailing space, valid UTF-8. Stores keep the fold of a
// session's title and first message and compare it with the folded
// words of a search, so that every store finds the same threads.
func SearchFold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// SearchWords returns the folded words of a search (ThreadFilter.Search):
// none when it has no word.
func SearchWords(search string) []string {
	return strings.Fields(SearchFold(search))
}
