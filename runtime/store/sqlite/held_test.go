package sqlite

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/store"
)

// Held subscription events are kept per call in arrival
// order, sized per call and in total, taken once, survive a reopen, and
// the calls that ended with events still held are found.
func TestHeldEvents(t *testing.T) {
	s, path := open(t)
	mkThread(t, s, "t1", "")
	update(t, s, func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{{ThreadID: "t1", CallID: "a", ToolName: "w"}, {ThreadID: "t1", CallID: "b", ToolName: "w"}})
	})
	for i := range 5 {
		call := "a"
		if i == 2 {
			call = "b"
		}
		update(t, s, func(tx store.Tx) error {
			return tx.HoldEvent(store.HeldEvent{ThreadID: "t1", CallID: call, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		})
	}
	view(t, s, func(tx store.Tx) error {
		st, err := tx.HeldEventStats("t1", "a")
		if err != nil || st.Count != 4 || st.Bytes != 4*7 || st.TotalBytes != 5*7 {
			t.Errorf("stats of a = %+v %v", st, err)
		}
		ended, err := tx.EndedHeldCalls()
		if err != nil || len(ended) != 0 {
			t.Errorf("ended = %+v %v, want none while both are pending", ended, err)
		}
		return nil
	})
	s.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	update(t, s, func(tx store.Tx) error {
		_, err := tx.SetCallState("t1", "b", store.CallDone)
		return err
	})
	update(t, s, func(tx store.Tx) error {
		ended, err := tx.EndedHeldCalls()
		if err != nil || len(ended) != 1 || ended[0].CallID != "b" {
			t.Errorf("ended = %+v %v, want call b", ended, err)
		}
		got, err := tx.TakeHeldEvents("t1", "a")
		if err != nil {
			return err
		}
		var texts string
		for _, e := range got {
			texts += string(e.Payload)
		}
		if texts != `{"n":0}{"n":1}{"n":3}{"n":4}` {
			t.Errorf("taken = %s, want arrival order", texts)
		}
		again, err := tx.TakeHeldEvents("t1", "a")
		if err != nil || len(again) != 0 {
			t.Errorf("taken twice: %+v %v", again, err)
		}
		return nil
	})
	if err := s.Update(t.Context(), func(tx store.Tx) error {
		return tx.HoldEvent(store.HeldEvent{ThreadID: "no-such-thread", CallID: "x", Payload: json.RawMessage(`{}`)})
	}); err == nil {
		t.Error("an event was held for a thread that does not exist")
	}
}

// The sweep's query looks calls up by key from the held events; it never
// scans the calls table.
func TestEndedHeldCallsPlan(t *testing.T) {
	s, _ := open(t)
	plan := queryPlan(t, s.group.conn, endedHeldCallsSQL)
	for _, d := range plan {
		if strings.HasPrefix(d, "SCAN c") || d == "SCAN calls" {
			t.Fatalf("the query scans calls: %v", plan)
		}
	}
	t.Logf("plan: %v", plan)
}
