// Package backend is the part of a runtime store that is not SQL, written
// once for every implementation of store.Tx (runtime/store/sqlite and
// runtime/store/postgres): the walk that puts a child thread's inherited
// history before its own, the defaults and checks applied to a record
// before it is written, which calls count as pending, and the versioned
// JSON kept in columns (columns.go). A store calls these functions and
// keeps only what needs its SQL; the engine does not import this package.
package backend

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// PendingCondition is the SQL condition, the same in every dialect, that
// a row of the calls table is pending (store.CallState.Pending): new or
// dispatched. The partial indexes on calls were created with it and a
// query for pending calls repeats it word for word so that the planner
// uses them. It is part of released migrations: it never changes; a new
// pending state needs a new migration that rebuilds those indexes.
const PendingCondition = `state IN ('new', 'dispatched')`

// Stamp returns v, or now when v is zero: the time a record gets when its
// writer left it unset.
func Stamp(v, now time.Time) time.Time {
	if v.IsZero() {
		return now
	}
	return v
}

// ThreadReader reads a thread's row inside a transaction.
type ThreadReader interface {
	// Thread returns the thread with id, or an error wrapping
	// store.ErrNotFound.
	Thread(id string) (store.Thread, error)
}

// NewThread returns th as CreateThread stores it: Status active when
// empty, Created now when zero, and RootID and UserID taken from the
// parent (read through threads) when empty, RootID being the thread's own
// id for a root thread. It refuses an empty id, a negative InheritSeq and
// an InheritSeq without a parent; a missing parent is an error wrapping
// store.ErrNotFound.
func NewThread(th store.Thread, now time.Time, threads ThreadReader) (store.Thread, error) {
	if th.ID == "" {
		return th, errors.New("create thread: empty id")
	}
	if th.InheritSeq < 0 || (th.InheritSeq > 0 && th.ParentID == "") {
		return th, fmt.Errorf("create thread %s: inherit_seq %d needs a parent and must not be negative", th.ID, th.InheritSeq)
	}
	if (th.RootID == "" || th.UserID == "") && th.ParentID != "" {
		// A child belongs to its parent's session, and to its user.
		parent, err := threads.Thread(th.ParentID)
		if errors.Is(err, store.ErrNotFound) {
			return th, fmt.Errorf("create thread %s: parent %w", th.ID, err)
		}
		if err != nil {
			return th, fmt.Errorf("create thread %s: read parent %s: %w", th.ID, th.ParentID, err)
		}
		if th.RootID == "" {
			th.RootID = parent.RootID
		}
		if th.UserID == "" {
			th.UserID = parent.UserID
		}
	}
	if th.RootID == "" {
		th.RootID = th.ID
	}
	if th.Status == "" {
		th.Status = store.ThreadActive
	}
	th.Created = Stamp(th.Created, now)
	return th, nil
}

// MessageWriter is what AppendMessages writes messages through.
type MessageWriter interface {
	// LastSeq returns the Seq of the thread's last message, inherited ones
	// included (store.Messages).
	LastSeq(threadID string) (int64, error)
	// InsertMessages inserts msgs, numbered and stamped, at the end of the
	// thread's history, their tool calls and results encoded with
	// EncodeMessage.
	InsertMessages(threadID string, msgs []store.Message) error
}

// AppendMessages implements store.Messages.AppendMessages on w: it
// numbers msgs after the thread's last Seq, stamps the ones without a
// Created with now, inserts them and returns them as stored.
func AppendMessages(w MessageWriter, threadID string, msgs []store.Message, now time.Time) ([]store.Message, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	last, err := w.LastSeq(threadID)
	if err != nil {
		return nil, fmt.Errorf("append to thread %s: %w", threadID, err)
	}
	out := numberMessages(threadID, last, now, msgs)
	if err := w.InsertMessages(threadID, out); err != nil {
		return nil, fmt.Errorf("append to thread %s: %w", threadID, err)
	}
	return out, nil
}

// numberMessages returns msgs as AppendMessages stores them in thread
// threadID, whose last Seq is last: each with ThreadID set, the next Seq,
// and Created now when zero. msgs is not changed.
func numberMessages(threadID string, last int64, now time.Time, msgs []store.Message) []store.Message {
	out := make([]store.Message, len(msgs))
	for i, m := range msgs {
		m.ThreadID = threadID
		m.Seq = last + int64(i) + 1
		m.Created = Stamp(m.Created, now)
		out[i] = m
	}
	return out
}

// NewCall returns c as PutCalls stores it: State new when empty,
// Arguments {} when empty, Created now when zero and Updated now.
func NewCall(c store.Call, now time.Time) store.Call {
	if c.State == "" {
		c.State = store.CallNew
	}
	if len(c.Arguments) == 0 {
		c.Arguments = []byte("{}")
	}
	c.Created = Stamp(c.Created, now)
	c.Updated = now
	return c
}

// Queue is what Enqueue writes an inbox item through.
type Queue interface {
	// MarkKeySeen records key as seen; it reports false if it already was
	// (store.Inbox).
	MarkKeySeen(threadID, key string) (bool, error)
	// InsertInboxItem queues item, whose Payload and Created are set,
	// unless an item with its DedupKey is queued; it reports whether it
	// did.
	InsertInboxItem(item store.InboxItem) (bool, error)
}

// Enqueue implements store.Inbox.Enqueue on q: it refuses an item without
// a thread, kind or dedup key; unless the item is marked Once, it marks
// its key seen and adds nothing when the key was seen before; it queues
// the item with Payload null when empty and Created now when zero.
func Enqueue(q Queue, item store.InboxItem, now time.Time) (bool, error) {
	if item.ThreadID == "" || item.Kind == "" || item.DedupKey == "" {
		return false, fmt.Errorf("enqueue: thread id, kind and dedup key are required (got %q, %q, %q)", item.ThreadID, item.Kind, item.DedupKey)
	}
	if !item.Once {
		added, err := q.MarkKeySeen(item.ThreadID, item.DedupKey)
		if err != nil || !added {
			return false, err
		}
	}
	if len(item.Payload) == 0 {
		item.Payload = []byte("null")
	}
	item.Created = Stamp(item.Created, now)
	return q.InsertInboxItem(item)
}

// CheckHeldEvent refuses a held event without a thread, a call or a
// payload (store.HeldEvents.HoldEvent).
func CheckHeldEvent(e store.HeldEvent) error {
	if e.ThreadID == "" || e.CallID == "" || len(e.Payload) == 0 {
		return errors.New("hold subscription event: thread id, call id and payload are required")
	}
	return nil
}

// NotFound is the error of a record that does not exist: what it is and
// its id (the parts of a composite id joined by "/"), wrapping
// store.ErrNotFound.
func NotFound(what string, id ...string) error {
	return fmt.Errorf("%s %s: %w", what, strings.Join(id, "/"), store.ErrNotFound)
}

// ParentsFirst orders the threads of one session so that every thread
// comes after its parent, keeping their order otherwise: a child made in
// the same instant as its parent may sort before it by time alone.
func ParentsFirst(threads []store.Thread) []store.Thread {
	placed := make(map[string]bool, len(threads))
	present := make(map[string]bool, len(threads))
	for _, th := range threads {
		present[th.ID] = true
	}
	out := make([]store.Thread, 0, len(threads))
	for len(out) < len(threads) {
		progress := false
		for _, th := range threads {
			if placed[th.ID] || (th.ParentID != "" && present[th.ParentID] && !placed[th.ParentID]) {
				continue
			}
			placed[th.ID], progress = true, true
			out = append(out, th)
		}
		if !progress { // a cycle, which CreateThread cannot make
			for _, th := range threads {
				if !placed[th.ID] {
					out = append(out, th)
				}
			}
			break
		}
	}
	return out
}

// SessionTables are the tables that keep records of a thread by its
// thread_id, in every store: deleting a session (store.Sessions) deletes
// its threads' rows from each, before the threads themselves.
var SessionTables = []string{
	"messages", "inbox", "seen_keys", "calls", "subscriptions", "views", "timers",
	"choices", "held_events", "call_checks", "thread_leases", "oauth_links",
	"thread_event_heads", "thread_events", "compactions",
}

// SearchText is the searchable text a store keeps of a session's root
// thread, from its title and first message (store.SearchFold of each, on
// a line of its own): what ThreadFilter.Search words are looked for in.
func SearchText(title, firstMessage string) string {
	return store.SearchFold(title) + "\n" + store.SearchFold(firstMessage)
}

// SearchPatterns returns a LIKE pattern (with ESCAPE '\') for each word
// of a search (store.ThreadFilter.Search): the folded word with LIKE's
// wildcards and the escape character escaped, between two %, so that it
// matches the word anywhere in a SearchText and nothing else. None when
// the search has no word.
func SearchPatterns(search string) []string {
	words := store.SearchWords(search)
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "%" + likeEscaper.Replace(w) + "%"
	}
	return out
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// ArchivedValues returns the two values of the Archived flag that
// filter a keeps, for a query's "archived IN (a, b)": both for
// store.ArchivedIncluded, one twice otherwise.
func ArchivedValues(f store.ArchivedFilter) (a, b bool) {
	switch f {
	case store.ArchivedExcluded:
		return false, false
	case store.ArchivedOnly:
		return true, true
	}
	return false, true
}
