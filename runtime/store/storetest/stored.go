package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// testStoredRecordsReadBack: what a store keeps as JSON in its columns
// (a message's tool calls and tool results, a call's arguments, a user
// choice's choices) reads back identically, every field and every byte of
// the JSON documents, from History, HistorySince, Call, ThreadChoices and
// TakeChoice.
func testStoredRecordsReadBack(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	turn := []store.Message{
		{Role: store.RoleAssistant, Text: "two calls", Created: at(time.Second), ToolCalls: []store.ToolCall{
			{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"go \"1.26\"","n":[1,2.5,null],"deep":{"ok":true}}`), Display: "search go"},
			{ID: "c2", Name: "fetch", Arguments: json.RawMessage(`{}`)},
		}},
		{Role: store.RoleTool, Created: at(2 * time.Second), ToolResults: []store.ToolResult{
			{CallID: "c1", Name: "search", Text: "found", Subscription: true,
				DisplayAs: []rap.DisplaySegment{rap.TextSegment("found it"), rap.DiffSegment("a.go", "-x\n+y"), {Type: "custom", Content: json.RawMessage(`{"k":[1]}`)}}},
			{CallID: "c2", Name: "fetch", Text: "Error: gone", IsError: true,
				Content: []rap.ContentItem{{Type: "text", Text: "gone"}, {Type: "image", Data: "aGk=", MediaType: "image/png"}}},
		}},
	}
	call := store.Call{ThreadID: "a", CallID: "c1", ToolName: "search", Arguments: turn[0].ToolCalls[0].Arguments,
		Toolset: "ts", Endpoint: "http://tools.example/invoke", TurnSeq: 1, State: store.CallDispatched, Created: at(time.Second)}
	choice := store.Choice{ThreadID: "a", CallID: "k1", ToolName: "ask", Prompt: "pick", Choices: []string{"yes", `"quoted"`, "ünïcode", ""},
		Default: 2, ResponseURL: "http://tools.example/choice?key=secret", Created: at(3 * time.Second)}
	update(t, s, func(tx store.Tx) error {
		if _, err := tx.AppendMessages("a", turn); err != nil {
			return err
		}
		if err := tx.PutCalls([]store.Call{call}); err != nil {
			return err
		}
		return tx.PutChoice(choice)
	})
	want := make([]store.Message, len(turn))
	for i, m := range turn {
		m.ThreadID, m.Seq = "a", int64(i+1)
		want[i] = m
	}
	view(t, s, func(tx store.Tx) error {
		h, err := tx.History("a")
		if err != nil {
			return err
		}
		sameMessages(t, "History(a)", h, want)
		since, err := tx.HistorySince("a", 1)
		if err != nil {
			return err
		}
		sameMessages(t, "HistorySince(a, 1)", since, want[1:])
		got, err := tx.Call("a", "c1")
		if err != nil {
			return err
		}
		if !slices.Equal(got.Arguments, call.Arguments) {
			t.Errorf("Call(a, c1).Arguments = %s, want the bytes written: %s", got.Arguments, call.Arguments)
		}
		cs, err := tx.ThreadChoices("a")
		if err != nil {
			return err
		}
		if len(cs) != 1 || !reflect.DeepEqual(cs[0].Choices, choice.Choices) || !choiceEqual(cs[0], choice) {
			t.Errorf("ThreadChoices(a) = %+v, want %+v", cs, choice)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		took, err := tx.TakeChoice("a", "k1")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(took.Choices, choice.Choices) || !choiceEqual(took, choice) {
			t.Errorf("TakeChoice(a, k1) = %+v, want %+v", took, choice)
		}
		return nil
	})
}

// sameMessages fails unless got holds want's messages, every field
// deeply equal (times by Equal).
func sameMessages(t *testing.T, what string, got, want []store.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %d messages, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Created.Equal(w.Created) {
			t.Errorf("%s[%d].Created = %v, want %v", what, i, g.Created, w.Created)
		}
		g.Created, w.Created = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s[%d] =\n%+v\nwant\n%+v", what, i, g, w)
		}
	}
}

// Helpers for a store's own tests of its JSON columns, which read and
// write rows behind the store's back in its SQL dialect.

// WriteVersionedRows creates thread "a" with a message of tool calls (Seq
// 1), one of tool results (Seq 2) and a user choice "k1", whose columns
// must then hold VersionedColumns.
func WriteVersionedRows(t *testing.T, s store.Store) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "a", Created: base}); err != nil {
			return err
		}
		if _, err := tx.AppendMessages("a", []store.Message{
			{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c1", Name: "x", Arguments: json.RawMessage(`{}`)}},
				Usage: &store.Usage{InputTokens: 3, OutputTokens: 2, Model: "m"}},
			{Role: store.RoleTool, ToolResults: []store.ToolResult{{CallID: "c1", Text: "ok"}}},
		}); err != nil {
			return err
		}
		return tx.PutChoice(store.Choice{ThreadID: "a", CallID: "k1", Choices: []string{"yes", "no"}})
	})
}

// VersionedColumns maps a query of one column to what it holds after
// WriteVersionedRows: every record of a message's tool calls and tool
// results, and a message's usage, carries format version 1; a choice's
// choices are the JSON array
// every release has written (version 1).
var VersionedColumns = map[string]string{
	`SELECT tool_calls FROM messages WHERE thread_id = 'a' AND seq = 1`:    `[{"v":1,"id":"c1","name":"x","arguments":{}}]`,
	`SELECT tool_results FROM messages WHERE thread_id = 'a' AND seq = 2`:  `[{"v":1,"call_id":"c1","text":"ok"}]`,
	`SELECT usage FROM messages WHERE thread_id = 'a' AND seq = 1`:         `{"v":1,"input_tokens":3,"output_tokens":2,"model":"m"}`,
	`SELECT choices FROM choices WHERE thread_id = 'a' AND call_id = 'k1'`: `["yes","no"]`,
}

// Column contents of format versions no release reads yet, for a store's
// test to write in thread "a": FutureToolResults as the tool_results of
// message 1, FutureChoices as the choices of choice "k1".
const (
	FutureToolResults = `[{"v":2,"call_id":"c1","outcome":{"text":"ok"}}]`
	FutureChoices     = `{"v":3,"options":[{"label":"yes"}]}`
)

// WantFutureVersionsRefused fails t unless, with FutureToolResults and
// FutureChoices written in thread "a", History and ThreadChoices fail with
// a *backend.FormatError whose message names the column and the version,
// instead of reading zero values.
func WantFutureVersionsRefused(t *testing.T, s store.Store) {
	t.Helper()
	for _, c := range []struct {
		what, column string
		version      int
		read         func(store.Tx) error
	}{
		{"History", backend.ToolResultsColumn, 2, func(tx store.Tx) error { _, err := tx.History("a"); return err }},
		{"ThreadChoices", backend.ChoicesColumn, 3, func(tx store.Tx) error { _, err := tx.ThreadChoices("a"); return err }},
	} {
		err := s.View(ctx(), c.read)
		var fe *backend.FormatError
		if !errors.As(err, &fe) || fe.Column != c.column || fe.Version != c.version {
			t.Errorf("%s of a row of format version %d: %v; want a *backend.FormatError for %s", c.what, c.version, err, c.column)
		} else if msg := err.Error(); !strings.Contains(msg, c.column) || !strings.Contains(msg, fmt.Sprintf("format version %d", c.version)) {
			t.Errorf("%s error %q does not name the column %s and the version %d", c.what, msg, c.column, c.version)
		}
	}
}
