package storetest

import (
	"encoding/json"
	"testing"

	"github.com/gorap/gorap/runtime/store"
)

// awkward is text a model or a tool server may well send: multi-byte
// characters, a NUL byte, quotes, backslashes and line breaks.
const awkward = "héllo 世界 🎉 \x00 nul, \"quoted\" \\back\\ \r\n\ttab \u2028 end"

// testAwkwardText: message texts, tool results and JSON payloads come back
// byte for byte (text) or value for value (JSON) whatever characters they
// hold, a NUL and the JSON escape \u0000 included (PostgreSQL's text type
// and jsonb refuse both as such).
func testAwkwardText(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	payload, err := json.Marshal(map[string]string{"text": awkward})
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, func(tx store.Tx) error {
		if _, err := tx.AppendMessages("a", []store.Message{
			{Role: store.RoleUser, Text: awkward, Created: at(0)},
			{Role: store.RoleTool, Created: at(0), ToolResults: []store.ToolResult{{CallID: "c", Name: "t", Text: awkward}}},
			{Role: store.RoleAssistant, Created: at(0), ToolCalls: []store.ToolCall{{ID: "c", Name: "t", Arguments: payload, Display: awkward}}},
		}); err != nil {
			return err
		}
		if _, err := tx.Enqueue(store.InboxItem{ThreadID: "a", Kind: store.KindUserMessage, Payload: payload, DedupKey: "k " + awkward}); err != nil {
			return err
		}
		return tx.PutView(store.View{ThreadID: "a", ViewType: "v", Content: payload})
	})
	view(t, s, func(tx store.Tx) error {
		h, err := tx.History("a")
		if err != nil {
			return err
		}
		if len(h) != 3 || h[0].Text != awkward || len(h[1].ToolResults) != 1 || h[1].ToolResults[0].Text != awkward ||
			len(h[2].ToolCalls) != 1 || h[2].ToolCalls[0].Display != awkward || !jsonEqual(h[2].ToolCalls[0].Arguments, payload) {
			t.Errorf("History with awkward text = %+v, want the texts byte for byte", h)
		}
		q, err := tx.Queued("a")
		if err != nil {
			return err
		}
		if len(q) != 1 || q[0].DedupKey != "k "+awkward || !jsonEqual(q[0].Payload, payload) {
			t.Errorf("Queued with awkward text = %+v", q)
		}
		if seen, err := tx.SeenKey("k " + awkward); err != nil || !seen {
			t.Errorf("SeenKey of an awkward key = %v, %v; want true", seen, err)
		}
		vs, err := tx.ThreadViews("a")
		if err != nil {
			return err
		}
		if len(vs) != 1 || !jsonEqual(vs[0].Content, payload) {
			t.Errorf("ThreadViews with awkward content = %+v", vs)
		}
		return nil
	})
}
