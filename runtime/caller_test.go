package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
)

// callAs sends one client API request to h as the caller c (nil: no
// caller) and returns the status and body.
func callAs(t *testing.T, h http.Handler, c *Caller, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:40000" // a client on this machine
	req.Header.Set("Content-Type", "application/json")
	if c != nil {
		req = req.WithContext(WithCaller(req.Context(), *c))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// A caller bound to a user sees and drives only that user's sessions:
// other users' threads answer 404 as unknown ones do, lists leave them
// out, and its new sessions belong to it whatever the request says. An
// admin, or a request without a caller, sees every session.
func TestCallerSeesOnlyTheirSessions(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	h := e.rt.Handler()
	alice, bob, admin := &Caller{UserID: "alice"}, &Caller{UserID: "bob"}, &Caller{Admin: true}
	create := func(c *Caller, body string) string {
		status, out := callAs(t, h, c, "POST", "/v1/threads", body)
		if status != http.StatusCreated {
			t.Fatalf("create as %+v: %d %s", c, status, out)
		}
		var r struct{ ID string }
		json.Unmarshal([]byte(out), &r)
		return r.ID
	}
	a1 := create(alice, `{}`)
	b1 := create(bob, `{"user_id":"bob"}`)
	if status, out := callAs(t, h, alice, "POST", "/v1/threads", `{"user_id":"bob"}`); status != http.StatusForbidden || !strings.Contains(out, "alice") {
		t.Errorf("alice creating a session for bob: %d %s; want 403 naming her user", status, out)
	}
	if u, err := e.rt.sessionUser(t.Context(), a1); err != nil || u != "alice" {
		t.Errorf("alice's session belongs to %q (%v)", u, err)
	}
	for _, path := range []string{"/v1/threads/" + b1, "/v1/threads/" + b1 + "/messages", "/v1/threads/" + b1 + "/choices", "/v1/threads/" + b1 + "/events"} {
		if status, out := callAs(t, h, alice, "GET", path, ""); status != http.StatusNotFound || !strings.Contains(out, "unknown thread") {
			t.Errorf("alice GET %s: %d %s; want 404 unknown thread", path, status, out)
		}
	}
	if status, _ := callAs(t, h, alice, "POST", "/v1/threads/"+b1+"/messages", `{"text":"hi"}`); status != http.StatusNotFound {
		t.Errorf("alice posting into bob's session: %d, want 404", status)
	}
	if status, _ := callAs(t, h, alice, "POST", "/v1/threads/"+b1+"/close", ``); status != http.StatusNotFound {
		t.Errorf("alice closing bob's session: %d, want 404", status)
	}
	if h := e.history(b1); len(h) != 0 {
		t.Errorf("alice's refused message reached bob's session: %+v", h)
	}
	if status, out := callAs(t, h, alice, "POST", "/v1/threads/"+a1+"/messages", `{"text":"hi"}`); status != http.StatusAccepted {
		t.Errorf("alice posting into her own session: %d %s", status, out)
	}
	list := func(c *Caller, query string) []string {
		status, out := callAs(t, h, c, "GET", "/v1/threads"+query, "")
		if status != http.StatusOK {
			t.Fatalf("list as %+v: %d %s", c, status, out)
		}
		var page struct{ Threads []struct{ ID string } }
		json.Unmarshal([]byte(out), &page)
		var ids []string
		for _, th := range page.Threads {
			ids = append(ids, th.ID)
		}
		return ids
	}
	if ids := list(alice, ""); len(ids) != 1 || ids[0] != a1 {
		t.Errorf("alice lists %v, want only %s", ids, a1)
	}
	if ids := list(alice, "?parent_id="+b1); len(ids) != 0 {
		t.Errorf("alice lists bob's children: %v", ids)
	}
	for _, c := range []*Caller{admin, nil} {
		if ids := list(c, ""); len(ids) != 2 {
			t.Errorf("%+v lists %v, want both sessions", c, ids)
		}
		if status, _ := callAs(t, h, c, "GET", "/v1/threads/"+b1, ""); status != http.StatusOK {
			t.Errorf("%+v reading bob's session: %d", c, status)
		}
	}
}

// The Go API answers for the Caller of its context as the HTTP API does:
// a caller bound to a user lists only that user's threads and cannot read
// another user's thread, which looks the same as one that does not exist;
// without a Caller (or as an admin) every thread is visible.
func TestGoAPIScopedToTheCaller(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	alice, err := e.rt.CreateThreadFor(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := e.rt.CreateThreadFor(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	asAlice := WithCaller(ctx, Caller{UserID: "alice"})
	threads, err := e.rt.Threads(asAlice)
	if err != nil || len(threads) != 1 || threads[0].ID != alice {
		t.Fatalf("Threads as alice = %+v, %v; want only %s", threads, err, alice)
	}
	if info, err := e.rt.ThreadInfo(asAlice, alice); err != nil || info.ID != alice || info.UserID != "alice" {
		t.Errorf("ThreadInfo(alice's thread) as alice = %+v, %v", info.Thread, err)
	}
	if _, err := e.rt.ThreadInfo(asAlice, bob); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("ThreadInfo(bob's thread) as alice: err = %v, want ErrUnknownThread", err)
	}
	if _, err := e.rt.History(asAlice, bob); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("History(bob's thread) as alice: err = %v, want ErrUnknownThread", err)
	}
	if _, err := e.rt.PendingChoices(asAlice, bob); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("PendingChoices(bob's thread) as alice: err = %v, want ErrUnknownThread", err)
	}
	if _, err := e.rt.AnswerChoice(asAlice, bob, "call-1", nil); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("AnswerChoice(bob's thread) as alice: err = %v, want ErrUnknownThread", err)
	}
	if err := e.rt.PostMessage(asAlice, bob, "hi"); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("PostMessage(bob's thread) as alice: err = %v, want ErrUnknownThread", err)
	}
	if err := e.rt.CloseThread(asAlice, bob); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("CloseThread(bob's thread) as alice: err = %v, want ErrUnknownThread", err)
	}
	if info, err := e.rt.ThreadInfo(ctx, bob); err != nil || info.Status != api.ThreadStatusActive || info.Queued != 0 {
		t.Errorf("bob's thread after alice's attempts: %+v, %v; want it active with nothing queued", info, err)
	}
	for name, c := range map[string]context.Context{"no caller": ctx, "admin": WithCaller(ctx, Caller{Admin: true})} {
		if threads, err := e.rt.Threads(c); err != nil || len(threads) != 2 {
			t.Errorf("Threads with %s: %d threads, %v; want both", name, len(threads), err)
		}
		if _, err := e.rt.ThreadInfo(c, bob); err != nil {
			t.Errorf("ThreadInfo(bob's thread) with %s: %v", name, err)
		}
	}
}
