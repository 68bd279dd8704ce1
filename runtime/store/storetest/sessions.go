package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// fillSession writes a session "s" (root s, child s.c, grandchild s.c.g)
// with one record of every kind on each thread, and another session "o"
// with one thread and the same records, which no session operation on "s"
// may touch.
func fillSession(t *testing.T, s store.Store, root string, start time.Duration) {
	t.Helper()
	ids := []string{root, root + ".c", root + ".c.g"}
	update(t, s, func(tx store.Tx) error {
		for i, id := range ids {
			th := store.Thread{ID: id, Status: store.ThreadActive, Created: at(start)} // same instant: parents first all the same
			if i > 0 {
				th.ParentID = ids[i-1]
			}
			if err := tx.CreateThread(th); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if _, err := tx.AppendMessages(id, []store.Message{{Role: store.RoleUser, Text: "hi " + id, Created: at(start)}}); err != nil {
				return err
			}
			if _, err := tx.Enqueue(store.InboxItem{ThreadID: id, Kind: store.KindUserMessage, Payload: json.RawMessage(`{"text":"q"}`), DedupKey: "q:" + id, Created: at(start)}); err != nil {
				return err
			}
			if _, err := tx.MarkKeySeen(id, "seen:"+id); err != nil {
				return err
			}
			if err := tx.PutCalls([]store.Call{{ThreadID: id, CallID: "c1", ToolName: "t", Arguments: json.RawMessage(`{}`), Toolset: "ts", Endpoint: "http://x", TurnSeq: 1, State: store.CallDispatched, Created: at(start), Updated: at(start)}}); err != nil {
				return err
			}
			if err := tx.PutSubscription(store.Subscription{ThreadID: id, CallID: "c1", ToolName: "t", State: store.SubscriptionActive, Created: at(start)}); err != nil {
				return err
			}
			if err := tx.PutView(store.View{ThreadID: id, ViewType: "v", Content: json.RawMessage(`{}`), Updated: at(start)}); err != nil {
				return err
			}
			if err := tx.PutTimer(store.Timer{ID: "timer:" + id, ThreadID: id, Kind: "sleep", Due: at(start + time.Hour), Created: at(start)}); err != nil {
				return err
			}
			if err := tx.PutChoice(store.Choice{ThreadID: id, CallID: "c1", ToolName: "t", Prompt: "p", Choices: []string{"a"}, ResponseURL: "http://x/r", Created: at(start)}); err != nil {
				return err
			}
			if err := tx.HoldEvent(store.HeldEvent{ThreadID: id, CallID: "c1", Payload: json.RawMessage(`{"e":1}`), Created: at(start)}); err != nil {
				return err
			}
			if err := tx.PutCallCheck(store.CallCheck{ThreadID: id, CallID: "c1", Due: at(start + time.Minute)}); err != nil {
				return err
			}
			if err := tx.PutOAuthLink(store.OAuthLink{ThreadID: id, CallID: "c1", Event: json.RawMessage(`{}`), Created: at(start), Expires: at(start + time.Hour)}); err != nil {
				return err
			}
			if _, err := tx.AppendThreadEvents([]store.ThreadEvent{{ThreadID: id, Type: "message", Data: json.RawMessage(`{}`)}}); err != nil {
				return err
			}
		}
		if err := tx.PutToolset(store.CachedToolset{RootID: root, BaseURL: "http://ts", Manifest: json.RawMessage(`{}`), Fetched: at(start)}); err != nil {
			return err
		}
		_, err := tx.TrustToolset(root, "http://ts", "d-"+root)
		return err
	})
}

// testSessions: SessionThreads lists a session's threads parents first,
// even when they share one creation instant; the Thread* reads return a
// thread's timers, seen keys, held events (left held) and checks, and
// SessionTrust the session's digests; DeleteSession removes every record
// of the session's threads and nothing of another session, reports how
// many threads it removed, and 0 for a session that does not exist.
func testSessions(t *testing.T, s store.Store) {
	fillSession(t, s, "s", 0)
	fillSession(t, s, "o", time.Second)
	view(t, s, func(tx store.Tx) error {
		threads, err := tx.SessionThreads("s")
		if err != nil {
			return err
		}
		var ids []string
		for _, th := range threads {
			ids = append(ids, th.ID)
		}
		if !slices.Equal(ids, []string{"s", "s.c", "s.c.g"}) {
			t.Errorf("SessionThreads(s) = %v; want [s s.c s.c.g], parents first", ids)
		}
		timers, err := tx.ThreadTimers("s.c")
		if err != nil {
			return err
		}
		if len(timers) != 1 || timers[0].ID != "timer:s.c" || !timers[0].Due.Equal(at(time.Hour)) {
			t.Errorf("ThreadTimers(s.c) = %+v; want the one timer timer:s.c", timers)
		}
		keys, err := tx.ThreadSeenKeys("s.c")
		if err != nil {
			return err
		}
		if !slices.Contains(keys, "seen:s.c") || slices.Contains(keys, "seen:s") {
			t.Errorf("ThreadSeenKeys(s.c) = %v; want seen:s.c and no other thread's key", keys)
		}
		held, err := tx.ThreadHeldEvents("s.c")
		if err != nil {
			return err
		}
		if len(held) != 1 || held[0].CallID != "c1" || string(held[0].Payload) != `{"e":1}` {
			t.Errorf("ThreadHeldEvents(s.c) = %+v; want the one held event of c1", held)
		}
		checks, err := tx.ThreadCallChecks("s.c")
		if err != nil {
			return err
		}
		if len(checks) != 1 || checks[0].CallID != "c1" || !checks[0].Due.Equal(at(time.Minute)) {
			t.Errorf("ThreadCallChecks(s.c) = %+v; want the check of c1", checks)
		}
		trust, err := tx.SessionTrust("s")
		if err != nil {
			return err
		}
		if len(trust) != 1 || trust["http://ts"] != "d-s" {
			t.Errorf("SessionTrust(s) = %v; want http://ts: d-s", trust)
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		// Reading held events left them held.
		st, err := tx.HeldEventStats("s.c", "c1")
		if err == nil && st.Count != 1 {
			t.Errorf("after ThreadHeldEvents, HeldEventStats counts %d events; want 1 (the read must not take them)", st.Count)
		}
		return err
	})
	var n int
	update(t, s, func(tx store.Tx) error {
		var err error
		n, err = tx.DeleteSession("s")
		return err
	})
	if n != 3 {
		t.Errorf("DeleteSession(s) removed %d threads; want 3", n)
	}
	view(t, s, func(tx store.Tx) error {
		for _, id := range []string{"s", "s.c", "s.c.g"} {
			if _, err := tx.Thread(id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after DeleteSession, Thread(%s): %v; want ErrNotFound", id, err)
			}
			if _, err := tx.Call(id, "c1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after DeleteSession, Call(%s, c1): %v; want ErrNotFound", id, err)
			}
			if seen, err := tx.SeenKey("seen:" + id); err != nil || seen {
				t.Errorf("after DeleteSession, SeenKey(seen:%s) = %v, %v; want false", id, seen, err)
			}
		}
		qs, err := tx.QueuedThreads()
		if err != nil {
			return err
		}
		if !slices.Equal(qs, []string{"o", "o.c", "o.c.g"}) {
			slices.Sort(qs)
			if !slices.Equal(qs, []string{"o", "o.c", "o.c.g"}) {
				t.Errorf("after DeleteSession(s), QueuedThreads = %v; want only session o's threads", qs)
			}
		}
		due, err := tx.DueTimers(at(24 * time.Hour))
		if err != nil {
			return err
		}
		for _, tm := range due {
			if tm.ThreadID[0] == 's' {
				t.Errorf("after DeleteSession(s), timer %s of %s remains", tm.ID, tm.ThreadID)
			}
		}
		if len(due) != 3 {
			t.Errorf("after DeleteSession(s), %d timers remain; want session o's 3", len(due))
		}
		other, err := tx.SessionThreads("o")
		if err != nil {
			return err
		}
		if len(other) != 3 {
			t.Errorf("DeleteSession(s) changed session o: %d threads left; want 3", len(other))
		}
		for _, id := range []string{"o", "o.c", "o.c.g"} {
			h, err := tx.History(id)
			if err != nil {
				return err
			}
			if len(h) == 0 {
				t.Errorf("DeleteSession(s) removed the history of %s", id)
			}
		}
		ts, err := tx.SessionToolsets("s")
		if err != nil {
			return err
		}
		if len(ts) != 0 {
			t.Errorf("after DeleteSession(s), %d cached toolsets remain", len(ts))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		// The ids are free again: the same session can be created anew.
		if err := tx.CreateThread(store.Thread{ID: "s", Status: store.ThreadActive, Created: at(time.Hour)}); err != nil {
			t.Errorf("CreateThread(s) after DeleteSession(s): %v; want the id free", err)
		}
		var err error
		n, err = tx.DeleteSession("nothing")
		return err
	})
	if n != 0 {
		t.Errorf("DeleteSession of an unknown session reported %d threads; want 0", n)
	}
}

// testMoves: PutMove inserts and replaces the record of (root,
// direction), keeping every field; SessionMove reads it (ErrNotFound when
// none); ListMoves lists them all; DeleteMove removes one and a missing
// one is not an error.
func testMoves(t *testing.T, s store.Store) {
	out := store.Move{RootID: "r", Direction: store.MoveOut, ID: "m1", State: store.MoveLeaving, Peer: "http://dest", Secret: "k", Created: at(0)}
	in := store.Move{RootID: "r", Direction: store.MoveIn, ID: "m0", State: store.MoveArrived, Peer: "http://src", Created: at(time.Second)}
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutMove(out); err != nil {
			return err
		}
		return tx.PutMove(in)
	})
	out.State, out.Data, out.Expires = store.MoveGone, json.RawMessage(`{"v":1}`), at(time.Hour)
	update(t, s, func(tx store.Tx) error { return tx.PutMove(out) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.SessionMove("r", store.MoveOut)
		if err != nil {
			return err
		}
		if got.ID != "m1" || got.State != store.MoveGone || got.Peer != "http://dest" || got.Secret != "k" ||
			string(got.Data) != `{"v":1}` || !got.Expires.Equal(at(time.Hour)) || !got.Created.Equal(at(0)) {
			t.Errorf("SessionMove(r, out) = %+v; want the replaced record with every field", got)
		}
		if _, err := tx.SessionMove("x", store.MoveOut); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SessionMove of an unknown session: %v; want ErrNotFound", err)
		}
		all, err := tx.ListMoves()
		if err != nil {
			return err
		}
		if len(all) != 2 {
			t.Errorf("ListMoves = %d records; want 2", len(all))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		if err := tx.DeleteMove("r", store.MoveOut); err != nil {
			return err
		}
		return tx.DeleteMove("r", store.MoveOut)
	})
	view(t, s, func(tx store.Tx) error {
		if _, err := tx.SessionMove("r", store.MoveOut); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after DeleteMove, SessionMove(r, out): %v; want ErrNotFound", err)
		}
		if got, err := tx.SessionMove("r", store.MoveIn); err != nil || got.ID != "m0" {
			t.Errorf("DeleteMove(r, out) touched (r, in): %+v, %v", got, err)
		}
		return nil
	})
}

// compactionBlock is a provider's compaction block, with bytes a
// re-encoding would change (spacing, escapes, non-ASCII, a NUL escape).
const compactionBlock = "{ \"type\":\"compaction\" ,\"content\":\"é \\u00e9 <&>\\u0000\",\"encrypted_content\":\"QUJD\"}\n"

// testCompactions: AddCompaction keeps every field (a provider's block
// byte for byte); LatestCompaction is the
// one of highest UpToSeq (ErrNotFound before any); a second compaction of
// the same UpToSeq is refused; ThreadCompactions lists them by UpToSeq;
// DeleteSession removes them.
func testCompactions(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "c", Created: at(0)}); err != nil {
			return err
		}
		if _, err := tx.LatestCompaction("c"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("LatestCompaction before any: %v; want ErrNotFound", err)
		}
		if err := tx.AddCompaction(store.Compaction{ThreadID: "c", UpToSeq: 40, Summary: "later", Messages: 20, Created: at(2 * time.Second)}); err != nil {
			return err
		}
		return tx.AddCompaction(store.Compaction{ThreadID: "c", UpToSeq: 20, Summary: "earlier – ünïcode", Messages: 20,
			Usage: &store.Usage{InputTokens: 5, OutputTokens: 3, Model: "m"}, Block: []byte(compactionBlock), Created: at(time.Second)})
	})
	err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.AddCompaction(store.Compaction{ThreadID: "c", UpToSeq: 40, Summary: "again"})
	})
	if err == nil {
		t.Errorf("a second compaction of the same UpToSeq was accepted")
	}
	view(t, s, func(tx store.Tx) error {
		c, err := tx.LatestCompaction("c")
		if err != nil {
			return err
		}
		if c.UpToSeq != 40 || c.Summary != "later" || c.Messages != 20 || !c.Created.Equal(at(2*time.Second)) || c.Usage != nil || c.Block != nil {
			t.Errorf("LatestCompaction = %+v; want the one up to 40", c)
		}
		all, err := tx.ThreadCompactions("c")
		if err != nil {
			return err
		}
		if len(all) != 2 || all[0].UpToSeq != 20 || all[0].Summary != "earlier – ünïcode" || all[0].Usage == nil || all[0].Usage.InputTokens != 5 {
			t.Errorf("ThreadCompactions = %+v; want both, by UpToSeq, with every field", all)
		} else if string(all[0].Block) != compactionBlock {
			t.Errorf("a compaction's block came back as %q; want the bytes stored, %q", all[0].Block, compactionBlock)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		_, err := tx.DeleteSession("c")
		return err
	})
	view(t, s, func(tx store.Tx) error {
		if all, err := tx.ThreadCompactions("c"); err != nil || len(all) != 0 {
			t.Errorf("after DeleteSession, ThreadCompactions = %v, %v; want none", all, err)
		}
		return nil
	})
}
