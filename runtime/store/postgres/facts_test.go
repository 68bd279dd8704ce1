package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// TestStateFactsAreTheOneByOneReads: a thread's state facts, read in one
// batch, are what Thread, Queued, ThreadTimers, ThreadChoices,
// PendingCalls, ThreadSubscriptions and LastSeq return one by one, for a
// thread with records of each kind and for one with none; a thread that
// does not exist is not found.
func TestStateFactsAreTheOneByOneReads(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := s.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"busy", "bare"} {
			if err := tx.CreateThread(store.Thread{ID: id}); err != nil {
				return err
			}
		}
		if _, err := tx.AppendMessages("busy", []store.Message{{Role: store.RoleUser, Text: "hi"}, {Role: store.RoleAssistant, Text: "hello"}}); err != nil {
			return err
		}
		if _, err := tx.Enqueue(store.InboxItem{ThreadID: "busy", Kind: store.KindUserMessage, Payload: json.RawMessage(`{"text":"more"}`), DedupKey: "k1"}); err != nil {
			return err
		}
		if err := tx.PutTimer(store.Timer{ID: "t1", ThreadID: "busy", Kind: "sleep", Payload: json.RawMessage(`{"call_id":"c2"}`), Due: now.Add(time.Hour)}); err != nil {
			return err
		}
		if err := tx.PutCalls([]store.Call{
			{ThreadID: "busy", CallID: "c1", ToolName: "job", Toolset: "ts", State: store.CallDispatched},
			{ThreadID: "busy", CallID: "c2", ToolName: "sleep", Toolset: "builtin", State: store.CallNew},
			{ThreadID: "busy", CallID: "c3", ToolName: "job", Toolset: "ts", State: store.CallDone},
		}); err != nil {
			return err
		}
		if err := tx.PutChoice(store.Choice{ThreadID: "busy", CallID: "c1", ToolName: "job", Prompt: "Go?", Choices: []string{"yes", "no"}}); err != nil {
			return err
		}
		return tx.PutSubscription(store.Subscription{ThreadID: "busy", CallID: "c1", ToolName: "job", State: store.SubscriptionActive})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"busy", "bare"} {
		err := s.View(ctx, func(tx store.Tx) error {
			got, err := tx.(store.StateFactsReader).StateFacts(id)
			if err != nil {
				return err
			}
			var want store.StateFacts
			if want.Thread, err = tx.Thread(id); err != nil {
				return err
			}
			if want.Queued, err = tx.Queued(id); err != nil {
				return err
			}
			if want.Timers, err = tx.ThreadTimers(id); err != nil {
				return err
			}
			if want.Choices, err = tx.ThreadChoices(id); err != nil {
				return err
			}
			if want.PendingCalls, err = tx.PendingCalls(id); err != nil {
				return err
			}
			if want.Subscriptions, err = tx.ThreadSubscriptions(id); err != nil {
				return err
			}
			if want.LastSeq, err = tx.LastSeq(id); err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("thread %s: facts read together\n%+v\nwant, read one by one,\n%+v", id, got, want)
			}
			if id == "busy" && (len(got.Queued) != 1 || len(got.Timers) != 1 || len(got.Choices) != 1 || len(got.PendingCalls) != 2 || len(got.Subscriptions) != 1 || got.LastSeq != 2) {
				t.Errorf("thread busy: facts %+v lack records it has", got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = s.View(ctx, func(tx store.Tx) error {
		_, err := tx.(store.StateFactsReader).StateFacts("missing")
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the facts of a missing thread: %v, want not found", err)
		}
		// The view goes on after it.
		_, err = tx.Thread("busy")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
