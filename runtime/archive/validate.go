package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/gorap/gorap/rap"
)

// Validate checks that s is whole and consistent, so that importing it
// cannot leave half a session: its root thread comes first and every
// other thread's parent comes before it, thread ids are unique, every
// record belongs to one of its threads, each thread's own messages are
// numbered on from what it inherits without a gap, a call appears once,
// statuses, roles and states are ones the runtime knows, and a
// compaction's block, when it has one, is a JSON object.
func (s *Session) Validate() error {
	if s.Root == "" {
		return invalidf("session without a root thread id")
	}
	bad := func(format string, args ...any) error {
		return invalidf("session %s: %s", s.Root, fmt.Sprintf(format, args...))
	}
	if len(s.Threads) == 0 || s.Threads[0].ID != s.Root || s.Threads[0].ParentID != "" {
		return bad("its first thread must be its root thread %s, without a parent", s.Root)
	}
	threads := make(map[string]Thread, len(s.Threads))
	for _, th := range s.Threads {
		if th.ID == "" {
			return bad("a thread without an id")
		}
		if _, dup := threads[th.ID]; dup {
			return bad("thread %s appears twice", th.ID)
		}
		if th.ID != s.Root {
			if _, ok := threads[th.ParentID]; !ok {
				return bad("thread %s comes before its parent %q, or its parent is not in the session", th.ID, th.ParentID)
			}
		}
		if th.Status != "active" && th.Status != "closed" {
			return bad("thread %s has status %q; want active or closed", th.ID, th.Status)
		}
		if th.ID != s.Root && (th.Title != "" || th.Archived) {
			return bad("child thread %s has a title or is archived; only the root thread %s has them", th.ID, s.Root)
		}
		if n := utf8.RuneCountInString(th.Title); n > MaxTitleChars {
			return bad("its title has %d characters; the most is %d", n, MaxTitleChars)
		}
		threads[th.ID] = th
	}
	in := func(kind, thread string) error {
		if _, ok := threads[thread]; !ok {
			return bad("a %s of thread %q, which is not in the session", kind, thread)
		}
		return nil
	}
	last := map[string]int64{}
	for _, m := range s.Messages {
		if err := in("message", m.Thread); err != nil {
			return err
		}
		want := last[m.Thread] + 1
		if _, seen := last[m.Thread]; !seen {
			want = threads[m.Thread].InheritSeq + 1
		}
		if m.Seq != want {
			return bad("message %d of thread %s should be number %d: a thread's messages are numbered on from what it inherits, without a gap", m.Seq, m.Thread, want)
		}
		switch m.Role {
		case "user", "assistant", "tool":
		default:
			return bad("message %d of thread %s has role %q; want user, assistant or tool", m.Seq, m.Thread, m.Role)
		}
		last[m.Thread] = m.Seq
	}
	for _, it := range s.Inbox {
		if err := in("queued message", it.Thread); err != nil {
			return err
		}
		if it.DedupKey == "" || it.Kind == "" {
			return bad("a queued message of thread %s without its kind or dedup_key", it.Thread)
		}
	}
	type key struct{ thread, call string }
	calls := map[key]bool{}
	for _, c := range s.Calls {
		if err := in("call", c.Thread); err != nil {
			return err
		}
		if calls[key{c.Thread, c.CallID}] {
			return bad("call %s of thread %s appears twice", c.CallID, c.Thread)
		}
		calls[key{c.Thread, c.CallID}] = true
		switch c.State {
		case "new", "dispatched", "done", "cancelled":
		default:
			return bad("call %s of thread %s has state %q", c.CallID, c.Thread, c.State)
		}
	}
	for _, x := range s.Subscriptions {
		if err := in("subscription", x.Thread); err != nil {
			return err
		}
	}
	for _, x := range s.Views {
		if err := in("view", x.Thread); err != nil {
			return err
		}
	}
	for _, x := range s.Timers {
		if err := in("timer", x.Thread); err != nil {
			return err
		}
		if x.ID == "" {
			return bad("a timer of thread %s without an id", x.Thread)
		}
	}
	for _, x := range s.Choices {
		if err := in("user choice", x.Thread); err != nil {
			return err
		}
		if x.Fields != nil {
			var fields []rap.InputField
			if err := json.Unmarshal(x.Fields, &fields); err != nil {
				return bad("the user input of call %s in thread %s has fields that do not read: %v", x.CallID, x.Thread, err)
			}
			if err := rap.ValidateInputFields(fields); err != nil {
				return bad("the user input of call %s in thread %s: %v", x.CallID, x.Thread, err)
			}
		}
	}
	for _, x := range s.HeldEvents {
		if err := in("held event", x.Thread); err != nil {
			return err
		}
	}
	for _, x := range s.CallChecks {
		if err := in("call check", x.Thread); err != nil {
			return err
		}
	}
	for _, x := range s.SeenKeys {
		if err := in("seen key", x.Thread); err != nil {
			return err
		}
	}
	for _, x := range s.Compactions {
		if err := in("compaction", x.Thread); err != nil {
			return err
		}
		if x.UpToSeq < 1 {
			return bad("a compaction of thread %s covers no message", x.Thread)
		}
		if b := bytes.TrimSpace(x.Block); len(x.Block) > 0 && (len(b) == 0 || b[0] != '{' || !json.Valid(b)) {
			return bad("the compaction of thread %s up to %d has a block that is not a JSON object: the model's API could not read it back", x.Thread, x.UpToSeq)
		}
	}
	return nil
}

// ErrInvalid is matched (errors.Is) by every error that says an archive
// is not one this package can import: not an archive, a later version,
// cut short, or inconsistent. Other errors come from the reader or store
// underneath.
var ErrInvalid = errors.New("invalid session archive")

// invalid is an error about the archive's content; it matches ErrInvalid.
type invalid struct{ msg string }

func (e *invalid) Error() string        { return e.msg }
func (e *invalid) Is(target error) bool { return target == ErrInvalid }

func invalidf(format string, args ...any) error {
	return &invalid{msg: fmt.Sprintf(format, args...)}
}
