package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// testThreadTitles: CreateThread keeps Title, FirstMessage and Archived;
// SetThreadTitle changes and removes the title; SetFirstMessage records
// a first message once and reports false after; SetThreadArchived sets
// and clears the flag; each of them on a thread that does not exist is
// an error wrapping ErrNotFound and changes nothing.
func testThreadTitles(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "given", Created: at(0), Title: "Kept", FirstMessage: "hello\x00there", Archived: true}); err != nil {
			return err
		}
		return tx.CreateThread(store.Thread{ID: "plain", Created: at(time.Millisecond)})
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Thread("given")
		if err != nil {
			return err
		}
		if got.Title != "Kept" || got.FirstMessage != "hello\x00there" || !got.Archived {
			t.Errorf("thread created with a title, first message and archived read back as %+v", got)
		}
		got, err = tx.Thread("plain")
		if err != nil {
			return err
		}
		if got.Title != "" || got.FirstMessage != "" || got.Archived {
			t.Errorf("thread created without a title read back with title %q, first message %q, archived %v", got.Title, got.FirstMessage, got.Archived)
		}
		return nil
	})
	var first, again bool
	update(t, s, func(tx store.Tx) error {
		if err := tx.SetThreadTitle("plain", "Über den Wolken"); err != nil {
			return err
		}
		var err error
		if first, err = tx.SetFirstMessage("plain", "the first"); err != nil {
			return err
		}
		if again, err = tx.SetFirstMessage("plain", "the second"); err != nil {
			return err
		}
		if err := tx.SetThreadArchived("plain", true); err != nil {
			return err
		}
		return tx.SetThreadArchived("given", false)
	})
	if !first || again {
		t.Errorf("SetFirstMessage reported %v, then %v; want true for the first message, false for the second", first, again)
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Thread("plain")
		if err != nil {
			return err
		}
		if got.Title != "Über den Wolken" || got.FirstMessage != "the first" || !got.Archived {
			t.Errorf("after SetThreadTitle, two SetFirstMessage and SetThreadArchived(true) the thread is %+v", got)
		}
		if got, _ := tx.Thread("given"); got.Archived {
			t.Errorf("SetThreadArchived(false) left the thread archived")
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.SetThreadTitle("plain", "") })
	view(t, s, func(tx store.Tx) error {
		if got, _ := tx.Thread("plain"); got.Title != "" || got.FirstMessage != "the first" {
			t.Errorf("SetThreadTitle(\"\") left title %q, first message %q; want no title and the first message kept", got.Title, got.FirstMessage)
		}
		return nil
	})
	for name, fn := range map[string]func(tx store.Tx) error{
		"SetThreadTitle":    func(tx store.Tx) error { return tx.SetThreadTitle("ghost", "x") },
		"SetFirstMessage":   func(tx store.Tx) error { _, err := tx.SetFirstMessage("ghost", "x"); return err },
		"SetThreadArchived": func(tx store.Tx) error { return tx.SetThreadArchived("ghost", true) },
	} {
		if err := s.Update(ctx(), fn); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s of a thread that does not exist = %v, want an error wrapping ErrNotFound", name, err)
		}
	}
}

// testFindThreads: FindThreads judges each thread by its session's root:
// a search finds the sessions whose title or first message holds every
// word, in any case (beyond ASCII too) and any order, taking %, _ and \
// literally, with their child threads; the archived filter includes,
// leaves out or keeps only archived sessions; ParentID and UserID narrow
// the scope; every page size walks the same threads in ListThreads'
// order, and the zero filter lists every thread.
func testFindThreads(t *testing.T, s store.Store) {
	type session struct {
		id, title, first, user string
		archived               bool
	}
	sessions := []session{
		{id: "s1", first: "Deploy the DB to staging", user: "alice"},
		{id: "s2", title: "Über-Planung", first: "plan the offsite", user: "alice", archived: true},
		{id: "s3", title: "Budget 100% done", first: "numbers", user: "bob"},
		{id: "s4", first: "file_name and back\\slash", user: "bob"},
		{id: "s5", user: "alice"}, // no message yet
		{id: "s6", title: "Release notes", first: "write the release notes", user: "bob", archived: true},
	}
	update(t, s, func(tx store.Tx) error {
		for i, x := range sessions {
			// Three sessions share one instant: the order ties on the id.
			created := at(time.Duration(min(i, 3)) * time.Millisecond)
			if err := tx.CreateThread(store.Thread{ID: x.id, Created: created, UserID: x.user}); err != nil {
				return err
			}
			if x.title != "" {
				if err := tx.SetThreadTitle(x.id, x.title); err != nil {
					return err
				}
			}
			if x.first != "" {
				if _, err := tx.SetFirstMessage(x.id, x.first); err != nil {
					return err
				}
			}
			if x.archived {
				if err := tx.SetThreadArchived(x.id, true); err != nil {
					return err
				}
			}
		}
		// Children: of a matching session, of an archived one, a grandchild.
		for _, c := range []store.Thread{
			{ID: "s1-a", ParentID: "s1", Created: at(10 * time.Millisecond)},
			{ID: "s1-a-x", ParentID: "s1-a", Created: at(11 * time.Millisecond)},
			{ID: "s2-a", ParentID: "s2", Created: at(10 * time.Millisecond)},
			{ID: "s3-a", ParentID: "s3", Created: at(12 * time.Millisecond)},
		} {
			if err := tx.CreateThread(c); err != nil {
				return err
			}
		}
		return nil
	})
	all := []string{"s1", "s2", "s3", "s4", "s5", "s6", "s1-a", "s2-a", "s1-a-x", "s3-a"}
	for _, c := range []struct {
		name string
		f    store.ThreadFilter
		want []string
	}{
		{"the zero filter", store.ThreadFilter{}, all},
		{"archived left out", store.ThreadFilter{Archived: store.ArchivedExcluded}, []string{"s1", "s3", "s4", "s5", "s1-a", "s1-a-x", "s3-a"}},
		{"archived only", store.ThreadFilter{Archived: store.ArchivedOnly}, []string{"s2", "s6", "s2-a"}},
		{"a word of the first message, in another case", store.ThreadFilter{Search: "db"}, []string{"s1", "s1-a", "s1-a-x"}},
		{"two words in another order", store.ThreadFilter{Search: "  STAGING   deploy "}, []string{"s1", "s1-a", "s1-a-x"}},
		{"a word and one that is nowhere", store.ThreadFilter{Search: "deploy production"}, nil},
		{"a word of a title beyond ASCII, in another case", store.ThreadFilter{Search: "über"}, []string{"s2", "s2-a"}},
		{"a word of the title or of the first message", store.ThreadFilter{Search: "release"}, []string{"s6"}},
		{"a word of the title and one of the first message", store.ThreadFilter{Search: "budget numbers"}, []string{"s3", "s3-a"}},
		{"% taken literally", store.ThreadFilter{Search: "100%"}, []string{"s3", "s3-a"}},
		{"% alone", store.ThreadFilter{Search: "%"}, []string{"s3", "s3-a"}},
		{"_ taken literally", store.ThreadFilter{Search: "e_n"}, []string{"s4"}},
		{"_ matches no other character", store.ThreadFilter{Search: "deploy_the"}, nil},
		{"\\ taken literally", store.ThreadFilter{Search: "back\\slash"}, []string{"s4"}},
		{"a word across the title and first message", store.ThreadFilter{Search: "done numbers"}, []string{"s3", "s3-a"}},
		{"a search and archived left out", store.ThreadFilter{Search: "the", Archived: store.ArchivedExcluded}, []string{"s1", "s1-a", "s1-a-x"}},
		{"a search of archived ones only", store.ThreadFilter{Search: "the", Archived: store.ArchivedOnly}, []string{"s2", "s6", "s2-a"}},
		{"a user's threads", store.ThreadFilter{UserID: "alice"}, []string{"s1", "s2", "s5", "s1-a", "s2-a", "s1-a-x"}},
		{"a user's threads but archived", store.ThreadFilter{UserID: "alice", Archived: store.ArchivedExcluded}, []string{"s1", "s5", "s1-a", "s1-a-x"}},
		{"a user's threads found", store.ThreadFilter{UserID: "bob", Search: "notes"}, []string{"s6"}},
		{"a parent's children", store.ThreadFilter{ParentID: "s1"}, []string{"s1-a"}},
		{"a parent's children found", store.ThreadFilter{ParentID: "s1-a", Search: "deploy"}, []string{"s1-a-x"}},
		{"the children of an archived session, archived left out", store.ThreadFilter{ParentID: "s2", Archived: store.ArchivedExcluded}, nil},
	} {
		view(t, s, func(tx store.Tx) error {
			for _, limit := range []int{1, 2, 3, 100} {
				ids, err := pageAll(t, limit, func(after store.ThreadCursor) ([]store.Thread, error) { return tx.FindThreads(c.f, after, limit) })
				if err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
				if !slices.Equal(ids, c.want) && len(ids)+len(c.want) > 0 {
					t.Errorf("FindThreads, %s (%+v), limit %d: %v, want %v", c.name, c.f, limit, ids, c.want)
				}
			}
			return nil
		})
	}
	// The threads found are read whole.
	view(t, s, func(tx store.Tx) error {
		got, err := tx.FindThreads(store.ThreadFilter{Search: "über", Archived: store.ArchivedOnly}, store.ThreadCursor{}, 1)
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].Title != "Über-Planung" || got[0].FirstMessage != "plan the offsite" || !got[0].Archived || got[0].UserID != "alice" {
			t.Errorf("FindThreads read %+v, want s2 with its title, first message, archived flag and user", got)
		}
		return nil
	})
	// A title change is found at once, the old title no more.
	update(t, s, func(tx store.Tx) error { return tx.SetThreadTitle("s5", "Quarterly REVIEW") })
	view(t, s, func(tx store.Tx) error {
		for q, want := range map[string][]string{"review": {"s5"}, "über": {"s2", "s2-a"}} {
			got, err := tx.FindThreads(store.ThreadFilter{Search: q}, store.ThreadCursor{}, 100)
			if err != nil {
				return err
			}
			if !slices.Equal(threadIDs(got), want) {
				t.Errorf("after renaming s5, a search for %q found %v, want %v", q, threadIDs(got), want)
			}
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.SetThreadTitle("s2", "") })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.FindThreads(store.ThreadFilter{Search: "über"}, store.ThreadCursor{}, 100)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			t.Errorf("after removing s2's title a search for its old title found %v", threadIDs(got))
		}
		got, err = tx.FindThreads(store.ThreadFilter{Search: "OFFSITE"}, store.ThreadCursor{}, 100)
		if err != nil {
			return err
		}
		if !slices.Equal(threadIDs(got), []string{"s2", "s2-a"}) {
			t.Errorf("after removing s2's title a search for its first message found %v", threadIDs(got))
		}
		return nil
	})
	// Text no store keeps as text (a NUL byte, invalid UTF-8) is kept as
	// it is, and searching it neither fails nor finds the bytes.
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "odd", Created: at(time.Second)}); err != nil {
			return err
		}
		if _, err := tx.SetFirstMessage("odd", "zero\x00byte \xff here"); err != nil {
			return err
		}
		return tx.SetThreadTitle("odd", strings.Repeat("long ", 100)+"\x00")
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Thread("odd")
		if err != nil {
			return err
		}
		if got.FirstMessage != "zero\x00byte \xff here" {
			t.Errorf("a first message with a NUL byte and invalid UTF-8 read back as %q", got.FirstMessage)
		}
		found, err := tx.FindThreads(store.ThreadFilter{Search: "HERE"}, store.ThreadCursor{}, 100)
		if err != nil {
			return err
		}
		if !slices.Equal(threadIDs(found), []string{"odd"}) {
			t.Errorf("a search for a word after a NUL byte and invalid UTF-8 found %v, want [odd]", threadIDs(found))
		}
		return nil
	})
}
