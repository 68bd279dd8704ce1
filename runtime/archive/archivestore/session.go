// Package archivestore moves sessions between a runtime store and the
// session archive (runtime/archive): ReadSession and WriteSession for one
// session inside a store transaction, Export and Import for a whole store
// or a stream. rap export and rap import use it on a store no process
// holds; the runtime uses it behind its client API.
package archivestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/store"
)

// ErrExists is returned (wrapped) by WriteSession when a thread of the
// session already exists in the store. Test for it with errors.Is.
var ErrExists = errors.New("the session's threads already exist here")

// ReadSession reads the session whose root thread is root from a store
// transaction, with every record the runtime keeps of it except the
// short-lived ones (oauth links, the client event log) and thread leases.
// A session that does not exist is an error wrapping store.ErrNotFound.
func ReadSession(tx store.Tx, root string) (*archive.Session, error) {
	threads, err := tx.SessionThreads(root)
	if err != nil {
		return nil, err
	}
	if len(threads) == 0 || threads[0].ID != root {
		return nil, fmt.Errorf("session %s: %w", root, store.ErrNotFound)
	}
	s := &archive.Session{Root: root}
	for _, th := range threads {
		s.Threads = append(s.Threads, archive.Thread{ID: th.ID, ParentID: th.ParentID, Status: string(th.Status), Created: th.Created,
			OriginCallID: th.OriginCallID, OriginTool: th.OriginTool, OriginArgs: th.OriginArgs, InheritSeq: th.InheritSeq, UserID: th.UserID,
			Title: th.Title, Archived: th.Archived})
		if err := readThread(tx, th, s); err != nil {
			return nil, fmt.Errorf("read thread %s of session %s: %w", th.ID, root, err)
		}
	}
	toolsets, err := tx.SessionToolsets(root)
	if err != nil {
		return nil, err
	}
	for _, c := range toolsets {
		s.Toolsets = append(s.Toolsets, archive.Toolset{BaseURL: c.BaseURL, Manifest: c.Manifest, Fetched: c.Fetched})
	}
	trust, err := tx.SessionTrust(root)
	if err != nil {
		return nil, err
	}
	for u, d := range trust {
		s.Trust = append(s.Trust, archive.Trust{BaseURL: u, SHA256: d})
	}
	sort.Slice(s.Trust, func(i, j int) bool { return s.Trust[i].BaseURL < s.Trust[j].BaseURL })
	return s, nil
}

func readThread(tx store.Tx, th store.Thread, s *archive.Session) error {
	hist, err := tx.HistorySince(th.ID, th.InheritSeq)
	if err != nil {
		return err
	}
	for _, m := range hist {
		if m.ThreadID != th.ID {
			continue // inherited: the parent's own
		}
		am := archive.Message{Thread: th.ID, Seq: m.Seq, Role: string(m.Role), Text: m.Text, Created: m.Created}
		if m.Usage != nil {
			u := archive.Usage(*m.Usage)
			am.Usage = &u
		}
		for _, c := range m.ToolCalls {
			am.ToolCalls = append(am.ToolCalls, archive.ToolCall(c))
		}
		for _, r := range m.ToolResults {
			am.ToolResults = append(am.ToolResults, archive.ToolResult(r))
		}
		s.Messages = append(s.Messages, am)
	}
	queued, err := tx.Queued(th.ID)
	if err != nil {
		return err
	}
	for _, it := range queued {
		s.Inbox = append(s.Inbox, archive.InboxItem{Thread: th.ID, Kind: string(it.Kind), Payload: it.Payload, DedupKey: it.DedupKey, Created: it.Created})
	}
	calls, err := tx.ThreadCalls(th.ID)
	if err != nil {
		return err
	}
	for _, c := range calls {
		s.Calls = append(s.Calls, archive.Call{Thread: th.ID, CallID: c.CallID, ToolName: c.ToolName, Arguments: c.Arguments, Toolset: c.Toolset,
			Endpoint: c.Endpoint, TurnSeq: c.TurnSeq, State: string(c.State), Deadline: c.Deadline, Created: c.Created, Updated: c.Updated})
	}
	subs, err := tx.ThreadSubscriptions(th.ID)
	if err != nil {
		return err
	}
	for _, x := range subs {
		s.Subscriptions = append(s.Subscriptions, archive.Subscription{Thread: th.ID, CallID: x.CallID, ToolName: x.ToolName, State: string(x.State), Created: x.Created})
	}
	views, err := tx.ThreadViews(th.ID)
	if err != nil {
		return err
	}
	for _, v := range views {
		s.Views = append(s.Views, archive.View{Thread: th.ID, ViewType: v.ViewType, Content: v.Content, Updated: v.Updated})
	}
	timers, err := tx.ThreadTimers(th.ID)
	if err != nil {
		return err
	}
	for _, t := range timers {
		s.Timers = append(s.Timers, archive.Timer{ID: t.ID, Thread: th.ID, Kind: t.Kind, Payload: t.Payload, Due: t.Due, Created: t.Created})
	}
	choices, err := tx.ThreadChoices(th.ID)
	if err != nil {
		return err
	}
	for _, c := range choices {
		s.Choices = append(s.Choices, archive.Choice{Thread: th.ID, CallID: c.CallID, ToolName: c.ToolName, Prompt: c.Prompt, Choices: c.Choices,
			Default: c.Default, ResponseURL: c.ResponseURL, Created: c.Created, Fields: c.Fields})
	}
	held, err := tx.ThreadHeldEvents(th.ID)
	if err != nil {
		return err
	}
	for _, e := range held {
		s.HeldEvents = append(s.HeldEvents, archive.HeldEvent{Thread: th.ID, CallID: e.CallID, Payload: e.Payload, Created: e.Created})
	}
	checks, err := tx.ThreadCallChecks(th.ID)
	if err != nil {
		return err
	}
	for _, c := range checks {
		s.CallChecks = append(s.CallChecks, archive.CallCheck{Thread: th.ID, CallID: c.CallID, Due: c.Due, Failures: c.Failures})
	}
	comps, err := tx.ThreadCompactions(th.ID)
	if err != nil {
		return err
	}
	for _, c := range comps {
		ac := archive.Compaction{Thread: th.ID, UpToSeq: c.UpToSeq, Summary: c.Summary, Messages: c.Messages, Block: c.Block, Created: c.Created}
		if c.Usage != nil {
			u := archive.Usage(*c.Usage)
			ac.Usage = &u
		}
		s.Compactions = append(s.Compactions, ac)
	}
	keys, err := tx.ThreadSeenKeys(th.ID)
	if err != nil {
		return err
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.SeenKeys = append(s.SeenKeys, archive.SeenKey{Thread: th.ID, Key: k})
	}
	return nil
}

// WriteSession writes s into a store transaction: its threads, histories
// (each message keeps its number), queued messages (in their order, with
// new ids), calls, subscriptions, views, timers, cached toolsets, trusted
// digests, user choices, held events, checks and seen keys. It validates
// s first, and refuses a session any of whose thread ids exists in the
// store with an error wrapping ErrExists; either way nothing is written
// (the caller rolls the transaction back on an error).
func WriteSession(tx store.Tx, s *archive.Session) error {
	if err := s.Validate(); err != nil {
		return err
	}
	for _, th := range s.Threads {
		_, err := tx.Thread(th.ID)
		if err == nil {
			return fmt.Errorf("session %s: thread %s: %w", s.Root, th.ID, ErrExists)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	for _, th := range s.Threads {
		first := ""
		if th.ID == s.Root {
			first = store.FirstMessageOf(firstUserText(s))
		}
		if err := tx.CreateThread(store.Thread{ID: th.ID, ParentID: th.ParentID, RootID: s.Root, Status: store.ThreadStatus(th.Status),
			Created: th.Created, OriginCallID: th.OriginCallID, OriginTool: th.OriginTool, OriginArgs: th.OriginArgs,
			InheritSeq: th.InheritSeq, UserID: th.UserID, Title: th.Title, FirstMessage: first, Archived: th.Archived}); err != nil {
			return err
		}
	}
	if err := writeMessages(tx, s); err != nil {
		return err
	}
	for _, it := range s.Inbox {
		if _, err := tx.Enqueue(store.InboxItem{ThreadID: it.Thread, Kind: store.InboxKind(it.Kind), Payload: it.Payload, DedupKey: it.DedupKey, Created: it.Created}); err != nil {
			return err
		}
	}
	var calls []store.Call
	for _, c := range s.Calls {
		calls = append(calls, store.Call{ThreadID: c.Thread, CallID: c.CallID, ToolName: c.ToolName, Arguments: c.Arguments, Toolset: c.Toolset,
			Endpoint: c.Endpoint, TurnSeq: c.TurnSeq, State: store.CallState(c.State), Deadline: c.Deadline, Created: c.Created, Updated: c.Updated})
	}
	if len(calls) > 0 {
		if err := tx.PutCalls(calls); err != nil {
			return err
		}
	}
	for _, x := range s.Subscriptions {
		if err := tx.PutSubscription(store.Subscription{ThreadID: x.Thread, CallID: x.CallID, ToolName: x.ToolName, State: store.SubscriptionState(x.State), Created: x.Created}); err != nil {
			return err
		}
	}
	for _, v := range s.Views {
		if err := tx.PutView(store.View{ThreadID: v.Thread, ViewType: v.ViewType, Content: v.Content, Updated: v.Updated}); err != nil {
			return err
		}
	}
	for _, t := range s.Timers {
		if err := tx.PutTimer(store.Timer{ID: t.ID, ThreadID: t.Thread, Kind: t.Kind, Payload: t.Payload, Due: t.Due, Created: t.Created}); err != nil {
			return err
		}
	}
	for _, c := range s.Toolsets {
		if err := tx.PutToolset(store.CachedToolset{RootID: s.Root, BaseURL: c.BaseURL, Manifest: c.Manifest, Fetched: c.Fetched}); err != nil {
			return err
		}
	}
	for _, t := range s.Trust {
		if _, err := tx.TrustToolset(s.Root, t.BaseURL, t.SHA256); err != nil {
			return err
		}
	}
	for _, c := range s.Choices {
		if err := tx.PutChoice(store.Choice{ThreadID: c.Thread, CallID: c.CallID, ToolName: c.ToolName, Prompt: c.Prompt, Choices: c.Choices,
			Default: c.Default, ResponseURL: c.ResponseURL, Created: c.Created, Fields: c.Fields}); err != nil {
			return err
		}
	}
	for _, e := range s.HeldEvents {
		if err := tx.HoldEvent(store.HeldEvent{ThreadID: e.Thread, CallID: e.CallID, Payload: e.Payload, Created: e.Created}); err != nil {
			return err
		}
	}
	for _, c := range s.CallChecks {
		if err := tx.PutCallCheck(store.CallCheck{ThreadID: c.Thread, CallID: c.CallID, Due: c.Due, Failures: c.Failures}); err != nil {
			return err
		}
	}
	for _, k := range s.SeenKeys {
		if _, err := tx.MarkKeySeen(k.Thread, k.Key); err != nil {
			return err
		}
	}
	for _, c := range s.Compactions {
		sc := store.Compaction{ThreadID: c.Thread, UpToSeq: c.UpToSeq, Summary: c.Summary, Messages: c.Messages, Block: c.Block, Created: c.Created}
		if c.Usage != nil {
			u := store.Usage(*c.Usage)
			sc.Usage = &u
		}
		if err := tx.AddCompaction(sc); err != nil {
			return err
		}
	}
	return nil
}

// writeMessages appends each thread's messages, checking that the store
// numbered them as the archive does.
func writeMessages(tx store.Tx, s *archive.Session) error {
	byThread := map[string][]store.Message{}
	var order []string
	for _, m := range s.Messages {
		if _, ok := byThread[m.Thread]; !ok {
			order = append(order, m.Thread)
		}
		sm := store.Message{ThreadID: m.Thread, Role: store.Role(m.Role), Text: m.Text, Created: m.Created}
		if m.Usage != nil {
			u := store.Usage(*m.Usage)
			sm.Usage = &u
		}
		for _, c := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, store.ToolCall(c))
		}
		for _, r := range m.ToolResults {
			sm.ToolResults = append(sm.ToolResults, store.ToolResult(r))
		}
		byThread[m.Thread] = append(byThread[m.Thread], sm)
	}
	first := map[string]int64{}
	for _, m := range s.Messages {
		if _, ok := first[m.Thread]; !ok {
			first[m.Thread] = m.Seq
		}
	}
	for _, id := range order {
		got, err := tx.AppendMessages(id, byThread[id])
		if err != nil {
			return err
		}
		if len(got) > 0 && got[0].Seq != first[id] {
			return fmt.Errorf("session %s: the store numbered the messages of thread %s from %d, the archive from %d", s.Root, id, got[0].Seq, first[id])
		}
	}
	return nil
}

// firstUserText returns the text of the first user message of s's root
// thread: from its history, or else its queued inputs; "" when it has
// none. The store keeps its start (store.Thread.FirstMessage), which an
// archive need not carry.
func firstUserText(s *archive.Session) string {
	for _, m := range s.Messages {
		if m.Thread == s.Root && m.Role == string(store.RoleUser) {
			return m.Text
		}
	}
	for _, it := range s.Inbox {
		if it.Thread == s.Root && it.Kind == string(store.KindUserMessage) {
			var m store.UserMessage
			if json.Unmarshal(it.Payload, &m) == nil {
				return m.Text
			}
		}
	}
	return ""
}
