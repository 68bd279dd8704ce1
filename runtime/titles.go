package runtime

// This file owns sessions' titles and archiving: the title derived from a
// session's first user message, the client API's UpdateThread (PATCH
// /v1/threads/{id}: rename, archive) and the thread_updated event. The
// thread list's search and archived filter are in threadpage.go.

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// derivedTitleChars is the most characters of a title derived from a
// first message, its ellipsis included.
const derivedTitleChars = 60

// derivedTitle returns the title a session without one of its own shows:
// the first line of its first user message that has text, its white
// space runs one space, cut on a word boundary with an ellipsis when it
// has more than derivedTitleChars characters; "" without a message.
func derivedTitle(first string) string {
	line := ""
	for l := range strings.Lines(first) {
		if line = oneLine(l); line != "" {
			break
		}
	}
	if utf8.RuneCountInString(line) <= derivedTitleChars {
		return line
	}
	runes := []rune(line)
	head := runes[:derivedTitleChars-1] // room for the ellipsis
	if runes[len(head)] != ' ' {
		// Cut before the word the limit splits, unless that word is most
		// of the title.
		if i := lastSpace(head); i >= derivedTitleChars/2 {
			head = head[:i]
		}
	}
	return strings.TrimRightFunc(string(head), func(r rune) bool { return r == ' ' || unicode.IsPunct(r) }) + "…"
}

// lastSpace returns the index of the last space in rs, or -1.
func lastSpace(rs []rune) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == ' ' {
			return i
		}
	}
	return -1
}

// oneLine returns s with each run of white space or control characters
// as one space, without leading or trailing space.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
}

// checkTitle returns a title a person gave as it is kept: without
// leading and trailing white space, each run of white space inside one
// space. A title that is not valid UTF-8, holds another control
// character or has more than api.MaxTitleChars characters wraps
// ErrBadInput.
func checkTitle(title string) (string, error) {
	if !utf8.ValidString(title) {
		return "", inputError("title is not valid UTF-8: send text")
	}
	title = strings.Join(strings.Fields(title), " ")
	for i, r := range []rune(title) {
		if unicode.IsControl(r) {
			return "", inputError(fmt.Sprintf("title has the control character %U at character %d: a title is plain text", r, i+1))
		}
	}
	if n := utf8.RuneCountInString(title); n > api.MaxTitleChars {
		return "", inputError(fmt.Sprintf("title has %d characters; the limit is %d", n, api.MaxTitleChars))
	}
	return title, nil
}

// sessionTitle is the title a root thread shows: its own, else the one
// derived from its first message. A child thread has neither.
func sessionTitle(th store.Thread) string {
	if th.Title != "" {
		return th.Title
	}
	return derivedTitle(th.FirstMessage)
}

// UpdateThread changes what req names of the session whose root thread
// is threadID, as PATCH /v1/threads/{id} does: its title (an empty one
// goes back to the title derived from the first user message) and
// whether it is archived. It returns the root thread as GET /v1/threads
// lists it, and when the title shown or the archived flag changed, sends
// it as a thread_updated event on the root's stream. A request that
// changes nothing named, a bad title (checkTitle) or a child thread's id
// wraps ErrBadInput; a thread the Caller of ctx may not see is
// ErrUnknownThread.
func (r *Runtime) UpdateThread(ctx context.Context, threadID string, req api.UpdateThreadRequest) (api.Thread, error) {
	if req.Title == nil && req.Archived == nil {
		return api.Thread{}, inputError(`nothing to change: send {"title": "..."}, {"archived": true|false} or both`)
	}
	var title string
	if req.Title != nil {
		var err error
		if title, err = checkTitle(*req.Title); err != nil {
			return api.Thread{}, err
		}
	}
	release, err := r.admitInput(threadID)
	if err != nil {
		return api.Thread{}, err
	}
	defer release()
	var out api.Thread
	fx := &effects{}
	err = r.store.Update(ctx, func(tx store.Tx) error {
		*fx = effects{}
		th, err := visibleThread(ctx, tx, threadID)
		if err != nil {
			return err
		}
		if th.ParentID != "" {
			return inputError(fmt.Sprintf("thread %s is a child thread of session %s: the title and archiving belong to the session; change them on its root thread %s", threadID, th.RootID, th.RootID))
		}
		before := apiThread(th)
		if req.Title != nil && title != th.Title {
			if err := tx.SetThreadTitle(threadID, title); err != nil {
				return err
			}
			th.Title = title
		}
		if req.Archived != nil && *req.Archived != th.Archived {
			if err := tx.SetThreadArchived(threadID, *req.Archived); err != nil {
				return err
			}
			th.Archived = *req.Archived
		}
		out = apiThread(th)
		if out.Title != before.Title || out.Archived != before.Archived {
			fx.event(threadID, api.EventThreadUpdated, out)
		}
		return nil
	})
	if err != nil {
		return api.Thread{}, err
	}
	r.apply(fx)
	return out, nil
}

// noteFirstMessage records text as the first user message of the
// session whose root thread is th, which has none yet; when that gives
// the session its title (it has none of its own), the thread_updated
// event tells clients.
func (r *Runtime) noteFirstMessage(tx store.Tx, th store.Thread, text string, fx *effects) error {
	th.FirstMessage = store.FirstMessageOf(text)
	set, err := tx.SetFirstMessage(th.ID, th.FirstMessage)
	if err != nil || !set || th.Title != "" {
		return err
	}
	fx.event(th.ID, api.EventThreadUpdated, apiThread(th))
	return nil
}
