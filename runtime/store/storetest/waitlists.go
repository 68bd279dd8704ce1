package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// The wait lists (store.WaitLists, when the store's transactions
// implement it) give the active subscriptions oldest first, of one
// user's threads when asked, leaving out the ended ones, and the timers
// of one kind, the earliest due first; each at most the limit asked.
func testWaitLists(t *testing.T, s store.Store) {
	var ok bool
	view(t, s, func(tx store.Tx) error {
		_, ok = tx.(store.WaitLists)
		return nil
	})
	if !ok {
		t.Skip("the store's transactions do not implement store.WaitLists")
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	update(t, s, func(tx store.Tx) error {
		for _, th := range []store.Thread{{ID: "ann1", UserID: "ann"}, {ID: "ann2", UserID: "ann"}, {ID: "bob1", UserID: "bob"}} {
			th.Status, th.Created = store.ThreadActive, now
			if err := tx.CreateThread(th); err != nil {
				return err
			}
		}
		for _, sub := range []store.Subscription{
			{ThreadID: "ann1", CallID: "s1", ToolName: "watch", State: store.SubscriptionActive, Created: now.Add(-time.Minute)},
			{ThreadID: "bob1", CallID: "s2", ToolName: "watch", State: store.SubscriptionActive, Created: now.Add(-time.Hour)},
			{ThreadID: "ann2", CallID: "s3", ToolName: "watch", State: store.SubscriptionFinal, Created: now.Add(-2 * time.Hour)},
			{ThreadID: "ann2", CallID: "s4", ToolName: "watch", State: store.SubscriptionActive, Created: now.Add(-time.Second)},
		} {
			if err := tx.PutSubscription(sub); err != nil {
				return err
			}
		}
		for _, tm := range []store.Timer{
			{ID: "t1", ThreadID: "ann1", Kind: "retry", Due: now.Add(time.Hour), Payload: []byte(`{"error":"boom"}`)},
			{ID: "t2", ThreadID: "bob1", Kind: "retry", Due: now.Add(time.Minute)},
			{ID: "t3", ThreadID: "ann2", Kind: "nap", Due: now},
			{ID: "t4", ThreadID: "ann2", Kind: "retry", Due: now.Add(2 * time.Hour)},
		} {
			if err := tx.PutTimer(tm); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		wl := tx.(store.WaitLists)
		subIDs := func(user string, limit int) []string {
			subs, err := wl.OldestActiveSubscriptions(user, limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range subs {
				ids = append(ids, s.CallID)
				if s.State != store.SubscriptionActive || s.ToolName != "watch" || s.Created.IsZero() {
					t.Errorf("subscription %+v: want an active one of the tool watch, with its time", s)
				}
			}
			return ids
		}
		for _, c := range []struct {
			user  string
			limit int
			want  []string
		}{{"", 10, []string{"s2", "s1", "s4"}}, {"", 2, []string{"s2", "s1"}}, {"ann", 10, []string{"s1", "s4"}}, {"carl", 10, nil}, {"", 0, nil}} {
			if got := subIDs(c.user, c.limit); !slices.Equal(got, c.want) {
				t.Errorf("OldestActiveSubscriptions(%q, %d) = %v, want %v", c.user, c.limit, got, c.want)
			}
		}
		timers, err := wl.TimersOfKind("retry", 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(timers) != 2 || timers[0].ID != "t2" || timers[1].ID != "t1" || string(timers[1].Payload) != `{"error":"boom"}` ||
			timers[1].ThreadID != "ann1" || !timers[1].Due.Equal(now.Add(time.Hour)) {
			t.Errorf("TimersOfKind(retry, 2) = %+v, want t2 then t1 with its payload and due time", timers)
		}
		return nil
	})
}
