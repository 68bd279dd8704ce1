package archivestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/archive/archivestore"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fill writes a session with a child thread that inherits two messages,
// and one record of every kind the archive carries.
func fill(t *testing.T, st store.Store, root string) {
	t.Helper()
	child := root + "-child"
	err := st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: root, Created: t0, UserID: "alice"}); err != nil {
			return err
		}
		if _, err := tx.AppendMessages(root, []store.Message{
			{Role: store.RoleUser, Text: "deploy it", Created: t0},
			{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c1", Name: "deploy", Arguments: json.RawMessage(`{"env":"prod"}`), Display: "deploy(prod)"}}, Created: t0},
			{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: "c0", Name: "look", Text: "ok", Content: []rap.ContentItem{{Type: "text", Text: "ok"}}, Subscription: true}}, Created: t0},
		}); err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: child, ParentID: root, Created: t0.Add(time.Second), OriginCallID: "c9", OriginTool: "spawn_thread",
			OriginArgs: json.RawMessage(`{"task":"watch"}`), InheritSeq: 2, Status: store.ThreadClosed}); err != nil {
			return err
		}
		if _, err := tx.AppendMessages(child, []store.Message{{Role: store.RoleUser, Text: "watch", Created: t0.Add(time.Second)}}); err != nil {
			return err
		}
		if _, err := tx.Enqueue(store.InboxItem{ThreadID: root, Kind: store.KindUserMessage, Payload: json.RawMessage(`{"text":"and then?"}`), DedupKey: "m:2", Created: t0}); err != nil {
			return err
		}
		if _, err := tx.Enqueue(store.InboxItem{ThreadID: root, Kind: store.KindToolResult, Payload: json.RawMessage(`{"call_id":"c7"}`), DedupKey: "r:c7", Created: t0}); err != nil {
			return err
		}
		if err := tx.PutCalls([]store.Call{
			{ThreadID: root, CallID: "c1", ToolName: "deploy", Arguments: json.RawMessage(`{"env":"prod"}`), Toolset: "ops", Endpoint: "http://ops", TurnSeq: 2, State: store.CallDispatched, Deadline: t0.Add(time.Hour), Created: t0, Updated: t0},
			{ThreadID: root, CallID: "c0", ToolName: "look", Arguments: json.RawMessage(`{}`), Toolset: "ops", Endpoint: "http://ops", TurnSeq: 1, State: store.CallDone, Created: t0, Updated: t0},
		}); err != nil {
			return err
		}
		if err := tx.PutSubscription(store.Subscription{ThreadID: root, CallID: "c0", ToolName: "look", State: store.SubscriptionActive, Created: t0}); err != nil {
			return err
		}
		if err := tx.PutView(store.View{ThreadID: root, ViewType: "progress", Content: json.RawMessage(`{"pct":40}`), Updated: t0}); err != nil {
			return err
		}
		if err := tx.PutTimer(store.Timer{ID: "sleep:" + root + ":c5", ThreadID: root, Kind: "sleep", Payload: json.RawMessage(`{"call_id":"c5"}`), Due: t0.Add(24 * time.Hour), Created: t0}); err != nil {
			return err
		}
		if err := tx.PutToolset(store.CachedToolset{RootID: root, BaseURL: "http://ops", Manifest: json.RawMessage(`{"name":"ops"}`), Fetched: t0}); err != nil {
			return err
		}
		if _, err := tx.TrustToolset(root, "http://ops", "abc123"); err != nil {
			return err
		}
		if err := tx.PutChoice(store.Choice{ThreadID: root, CallID: "c1", ToolName: "deploy", Prompt: "Really?", Choices: []string{"yes", "no"}, Default: 1, ResponseURL: "http://ops/answer?key=s3cret", Created: t0}); err != nil {
			return err
		}
		if err := tx.PutChoice(store.Choice{ThreadID: root, CallID: "c2", ToolName: "signup", Prompt: "Details?", ResponseURL: "http://ops/input?key=s3cret", Created: t0,
			Fields: json.RawMessage(`[{"name":"email","type":"string","required":true}]`)}); err != nil {
			return err
		}
		if err := tx.HoldEvent(store.HeldEvent{ThreadID: root, CallID: "c1", Payload: json.RawMessage(`{"event_id":"e1"}`), Created: t0}); err != nil {
			return err
		}
		if err := tx.PutCallCheck(store.CallCheck{ThreadID: root, CallID: "c1", Due: t0.Add(time.Minute), Failures: 2}); err != nil {
			return err
		}
		if _, err := tx.MarkKeySeen(root, "event:c0:e0"); err != nil {
			return err
		}
		if err := tx.SetThreadTitle(root, "Deploy "+root); err != nil {
			return err
		}
		if err := tx.SetThreadArchived(root, true); err != nil {
			return err
		}
		if err := tx.AddCompaction(store.Compaction{ThreadID: root, UpToSeq: 2, Summary: "they asked to deploy", Messages: 2, Created: t0}); err != nil {
			return err
		}
		// A compaction the model's API made, with its block.
		return tx.AddCompaction(store.Compaction{ThreadID: root, UpToSeq: 3, Summary: "deployed", Messages: 3, Block: []byte(providerBlock), Created: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// providerBlock is a compaction block as a model's API sent it, with
// bytes that re-encoding JSON would change.
const providerBlock = "{ \"type\":\"compaction\", \"content\":\"deployed <ok> \\u00e9\",\"encrypted_content\":\"QUJD\" }"

func read(t *testing.T, st store.Store, root string) *archive.Session {
	t.Helper()
	var s *archive.Session
	err := st.View(context.Background(), func(tx store.Tx) error {
		var err error
		s, err = archivestore.ReadSession(tx, root)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func write(st store.Store, s *archive.Session) error {
	return st.Update(context.Background(), func(tx store.Tx) error { return archivestore.WriteSession(tx, s) })
}

// roundTrip writes sessions to an archive and reads them back.
func roundTrip(t *testing.T, sessions ...*archive.Session) []*archive.Session {
	t.Helper()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if err := w.WriteSession(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := archive.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out []*archive.Session
	for {
		s, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
}

// A session read from one store, written to an archive, read back and
// written into another store reads the same there, record for record,
// whether the other store is SQLite or PostgreSQL.
func TestSessionSurvivesArchiveIntoAnotherStore(t *testing.T) {
	src := openSQLite(t)
	fill(t, src, "s1")
	fill(t, src, "s2")
	before := read(t, src, "s1")
	if before.Records() < 17 {
		t.Fatalf("the filled session has %d records; the test needs one of every kind", before.Records())
	}
	if len(before.Choices) != 2 || before.Choices[1].Fields == nil {
		t.Fatalf("the filled session has choices %+v; the test needs a user input (with fields)", before.Choices)
	}
	got := roundTrip(t, before, read(t, src, "s2"))
	if len(got) != 2 || got[0].Root != "s1" || got[1].Root != "s2" {
		t.Fatalf("read back %d sessions", len(got))
	}
	dests := map[string]func(t *testing.T) store.Store{"sqlite": openSQLite}
	if pgtest.URL(t) != "" {
		dests["postgres"] = func(t *testing.T) store.Store { return pgtest.Open(t) }
	}
	for name, open := range dests {
		t.Run(name, func(t *testing.T) {
			dst := open(t)
			if err := write(dst, got[0]); err != nil {
				t.Fatal(err)
			}
			after := read(t, dst, "s1")
			if !reflect.DeepEqual(normal(before), normal(after)) {
				a, _ := json.MarshalIndent(normal(before), "", " ")
				b, _ := json.MarshalIndent(normal(after), "", " ")
				t.Errorf("the session differs after its trip through an archive:\nbefore %s\nafter  %s", a, b)
			}
			// The child still reads its inherited history from the parent;
			// a compaction keeps its provider block byte for byte, and one
			// without (as in every archive written before blocks) has none.
			err := dst.View(context.Background(), func(tx store.Tx) error {
				comps, err := tx.ThreadCompactions("s1")
				if err != nil {
					return err
				}
				if len(comps) != 2 || comps[0].Block != nil || string(comps[1].Block) != providerBlock {
					t.Errorf("compactions after import = %+v; want the first without a block, the second with %q", comps, providerBlock)
				}
				h, err := tx.History("s1-child")
				if err != nil {
					return err
				}
				if len(h) != 3 || h[0].Text != "deploy it" || h[2].Text != "watch" || h[2].Seq != 3 {
					t.Errorf("the child's history after import = %+v; want the parent's 2 messages then its own as 3", h)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// normal makes JSON fields comparable as values and times as instants.
// A call's Updated is when a store last wrote it: the import's time.
func normal(s *archive.Session) any {
	calls := append([]archive.Call(nil), s.Calls...)
	for i := range calls {
		calls[i].Updated = time.Time{}
	}
	b, _ := json.Marshal(struct {
		S  *archive.Session
		T  []archive.Thread
		M  []archive.Message
		I  []archive.InboxItem
		C  []archive.Call
		Su []archive.Subscription
		V  []archive.View
		Ti []archive.Timer
		To []archive.Toolset
		Tr []archive.Trust
		Ch []archive.Choice
		H  []archive.HeldEvent
		CC []archive.CallCheck
		K  []archive.SeenKey
		Co []archive.Compaction
	}{s, s.Threads, s.Messages, s.Inbox, calls, s.Subscriptions, s.Views, s.Timers, s.Toolsets, s.Trust, s.Choices, s.HeldEvents, s.CallChecks, s.SeenKeys, s.Compactions})
	var v any
	json.Unmarshal(b, &v)
	return v
}

// Importing a session whose threads exist is refused with ErrExists and
// writes nothing: the store keeps what it had.
func TestWriteSessionRefusesExistingThreads(t *testing.T) {
	src := openSQLite(t)
	fill(t, src, "s1")
	s := read(t, src, "s1")
	dst := openSQLite(t)
	err := dst.Update(context.Background(), func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "s1-child", Created: t0}) // a root of its own there
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(dst, s); !errors.Is(err, archivestore.ErrExists) || !strings.Contains(err.Error(), "s1-child") {
		t.Fatalf("import over an existing thread: %v; want ErrExists naming s1-child", err)
	}
	err = dst.View(context.Background(), func(tx store.Tx) error {
		if _, err := tx.Thread("s1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after the refused import, thread s1: %v; want nothing written", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func archiveText(t *testing.T, s *archive.Session) string {
	var buf bytes.Buffer
	w, _ := archive.NewWriter(&buf, "test")
	if err := w.WriteSession(s); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.String()
}

func readAll(text string) error {
	r, err := archive.NewReader(strings.NewReader(text))
	if err != nil {
		return err
	}
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// A file that is not an archive, a later version, a file cut short, a
// record of an unknown type and a count that does not match are each
// refused with an error that says which.
func TestReaderRefusesWhatItCannotTrust(t *testing.T) {
	src := openSQLite(t)
	fill(t, src, "s1")
	good := archiveText(t, read(t, src, "s1"))
	lines := strings.SplitAfter(good, "\n")
	if err := readAll(good); err != nil {
		t.Fatalf("a good archive: %v", err)
	}
	cases := map[string]struct{ text, want string }{
		"empty":           {"", "empty"},
		"not an archive":  {`{"hello":1}` + "\n", "not a gorap session archive"},
		"later version":   {strings.Replace(good, `"version":1`, `"version":99`, 1), "version 99"},
		"cut short":       {strings.Join(lines[:len(lines)-2], ""), "cut short"},
		"cut mid-session": {strings.Join(lines[:5], ""), "ends inside session s1"},
		"unknown type":    {strings.Replace(good, `{"type":"view"`, `{"type":"hologram"`, 1), `"hologram"`},
		"count":           {strings.Replace(good, `"type":"end","sessions":1`, `"type":"end","sessions":2`, 1), "counts 2 sessions"},
		"record count":    {strings.Replace(good, `{"type":"seen_key"`, `{"type":"nothing_here_either"`, 1), "nothing_here_either"},
		"gap":             {strings.Replace(good, `"seq":3,`, `"seq":4,`, 1), "should be number 3"},
		"user input form": {strings.Replace(good, `{"name":"email","type":"string"`, `{"name":"email","type":"colour"`, 1), "fields[0].type"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := readAll(c.text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v; want one containing %q", err, c.want)
			}
		})
	}
}

// A session whose compaction carries a block that is not a JSON object
// is refused (ErrInvalid) and writes nothing: the model's API could not
// read the block back.
func TestWriteSessionRefusesBrokenCompactionBlock(t *testing.T) {
	src := openSQLite(t)
	fill(t, src, "s1")
	s := read(t, src, "s1")
	s.Compactions[len(s.Compactions)-1].Block = []byte(`{"type":"compaction",`)
	dst := openSQLite(t)
	err := write(dst, s)
	if !errors.Is(err, archive.ErrInvalid) || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("writing a broken block: %v; want ErrInvalid saying why", err)
	}
	err = dst.View(context.Background(), func(tx store.Tx) error {
		if _, err := tx.Thread("s1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("thread s1 after a refused import: %v; want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The root thread's title and archived flag go with the session; a
// session of an archive written before titles (no title, no archived
// flag) imports as one that has neither. The store derives the session's
// first message from the first user message in the archive: its history,
// or else its queued messages.
func TestTitlesGoWithTheSession(t *testing.T) {
	src := openSQLite(t)
	fill(t, src, "s1")
	s := roundTrip(t, read(t, src, "s1"))[0]
	if s.Threads[0].Title != "Deploy s1" || !s.Threads[0].Archived || s.Threads[1].Title != "" || s.Threads[1].Archived {
		t.Fatalf("threads read from the archive: %+v; want the root's title and archived flag, none on the child", s.Threads)
	}
	text := archiveText(t, s)
	if !strings.Contains(text, `"title":"Deploy s1","archived":true`) {
		t.Errorf("the archive's root thread line lacks its title and archived flag:\n%s", text)
	}
	older := strings.Replace(text, `,"title":"Deploy s1","archived":true`, "", 1)
	if older == text {
		t.Fatal("could not take the title out of the archive")
	}
	r, err := archive.NewReader(strings.NewReader(older))
	if err != nil {
		t.Fatal(err)
	}
	old, err := r.Next()
	if err != nil {
		t.Fatalf("an archive without titles: %v", err)
	}
	queued := *old
	queued.Root, queued.Threads, queued.Messages = "q1", []archive.Thread{{ID: "q1", Status: "active", Created: t0}}, nil
	queued.Inbox = []archive.InboxItem{{Thread: "q1", Kind: "user_message", Payload: json.RawMessage(`{"text":"  from the inbox\nsecond line"}`), DedupKey: "k", Created: t0}}
	queued.Calls, queued.Subscriptions, queued.Views, queued.Timers, queued.Choices, queued.HeldEvents, queued.CallChecks, queued.SeenKeys, queued.Compactions = nil, nil, nil, nil, nil, nil, nil, nil, nil
	queued.Toolsets, queued.Trust = nil, nil
	for name, in := range map[string]*archive.Session{"with a title": s, "older": old, "queued only": &queued} {
		dst := openSQLite(t)
		if err := write(dst, in); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := dst.View(context.Background(), func(tx store.Tx) error {
			root, err := tx.Thread(in.Root)
			if err != nil {
				return err
			}
			want := store.Thread{Title: "Deploy s1", FirstMessage: "deploy it", Archived: true}
			switch name {
			case "older":
				want.Title, want.Archived = "", false
			case "queued only":
				want = store.Thread{FirstMessage: "from the inbox\nsecond line"}
			}
			if root.Title != want.Title || root.FirstMessage != want.FirstMessage || root.Archived != want.Archived {
				t.Errorf("%s: the imported root has title %q, first message %q, archived %v; want %q, %q, %v",
					name, root.Title, root.FirstMessage, root.Archived, want.Title, want.FirstMessage, want.Archived)
			}
			if len(in.Threads) > 1 {
				child, err := tx.Thread(in.Threads[1].ID)
				if err != nil {
					return err
				}
				if child.Title != "" || child.FirstMessage != "" || child.Archived {
					t.Errorf("%s: the imported child has %+v; want no title, first message or archived flag", name, child)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// An archive whose child thread has a title or is archived, or whose
// title is longer than the client API allows, is refused.
func TestValidateRefusesBadTitles(t *testing.T) {
	src := openSQLite(t)
	fill(t, src, "s1")
	for name, change := range map[string]func(s *archive.Session){
		"a child with a title": func(s *archive.Session) { s.Threads[1].Title = "x" },
		"an archived child":    func(s *archive.Session) { s.Threads[1].Archived = true },
		"a title too long":     func(s *archive.Session) { s.Threads[0].Title = strings.Repeat("é", archive.MaxTitleChars+1) },
	} {
		s := read(t, src, "s1")
		change(s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	s := read(t, src, "s1")
	s.Threads[0].Title = strings.Repeat("é", archive.MaxTitleChars)
	if err := s.Validate(); err != nil {
		t.Errorf("a title of the longest length: %v", err)
	}
}
