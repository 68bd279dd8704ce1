package runtime

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/store"
)

// A session exported from one runtime through the client API and imported
// into another keeps its thread id and history there and resumes: its
// pending sleep fires at the new runtime. Importing it a second time is
// refused (409) and changes nothing.
func TestExportedSessionResumesWhereItIsImported(t *testing.T) {
	turns := []scripted.Turn{
		{AfterUser: "nap", Text: "sleeping", ToolCalls: []scripted.Call{call(BuiltinSleep, `{"seconds": 2, "reason": "test"}`)}},
		{When: &scripted.When{LastResultContains: "Woke up"}, Text: "rested"},
		{Text: "?", Repeat: true},
	}
	a := newEnv(t, envOptions{turns: turns})
	b := newEnv(t, envOptions{turns: turns})
	th := a.newThread()
	a.post(th, "nap")
	a.idle(th)
	ctx := context.Background()
	ca, err := client.New(a.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ca.Export(ctx, &buf, th); err != nil {
		t.Fatal(err)
	}
	a.stop() // the session lives on at b only
	cb, err := client.New(b.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	archived := buf.String()
	got, err := cb.Import(ctx, strings.NewReader(archived))
	if err != nil || len(got) != 1 || got[0] != th {
		t.Fatalf("Import = %v, %v; want [%s]", got, err, th)
	}
	h := b.waitHistory(th, "the sleep to end at the importing runtime", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "rested")
	})
	if !hasText(h, store.RoleUser, "nap") || !hasText(h, store.RoleAssistant, "sleeping") {
		t.Fatalf("the imported history lacks what came before the move:\n%s", dump(h))
	}
	before := len(h)
	got, err = cb.Import(ctx, strings.NewReader(archived))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 409 || len(got) != 0 {
		t.Fatalf("a second import of the same session = %v, %v; want 409 and nothing imported", got, err)
	}
	b.idle(th)
	if n := len(b.history(th)); n != before {
		t.Fatalf("the refused import changed the history: %d messages, had %d", n, before)
	}
}

// An archive cut short is refused with 400 and a message saying so; a
// token bound to one user may neither import nor export another user's
// session.
func TestImportRefusesBadArchivesAndScopedCallers(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "hi", Repeat: true}}})
	th := e.newThread()
	e.post(th, "hello")
	e.idle(th)
	var buf bytes.Buffer
	if _, err := e.rt.ExportSessions(context.Background(), &buf, []string{th}); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	cut := strings.Join(lines[:len(lines)-3], "")
	c, err := client.New(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Import(context.Background(), strings.NewReader(cut))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || !strings.Contains(ce.Message, "cut short") {
		t.Fatalf("import of a cut archive: %v; want 400 saying it was cut short", err)
	}
	scoped := api.WithCaller(context.Background(), api.Caller{UserID: "mallory"})
	if _, err := e.rt.ImportSessions(scoped, strings.NewReader(buf.String())); !errors.Is(err, api.ErrNotAllowed) {
		t.Fatalf("import by a user-bound caller: %v; want ErrNotAllowed", err)
	}
	if _, err := e.rt.ExportSessions(scoped, &bytes.Buffer{}, []string{th}); !errors.Is(err, api.ErrUnknownThread) {
		t.Fatalf("export of another user's session by a user-bound caller: %v; want ErrUnknownThread", err)
	}
	var all bytes.Buffer
	n, err := e.rt.ExportSessions(scoped, &all, nil)
	if err != nil || n != 0 || strings.Contains(all.String(), th) {
		t.Fatalf("export of all sessions by a user-bound caller wrote %d sessions (%v); want none of another user's", n, err)
	}
}
