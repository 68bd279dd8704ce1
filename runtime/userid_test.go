package runtime

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// createThreadHTTP creates a thread through the client API over real HTTP.
func createThreadHTTP(t *testing.T, e *env, body string) string {
	t.Helper()
	resp, err := http.Post(e.srv.URL+"/v1/threads", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusCreated || out.ID == "" {
		t.Fatalf("POST /v1/threads %s: status %d, error %q", body, resp.StatusCode, out.Error)
	}
	return out.ID
}

// A session created through the client API with a
// user_id carries it in every invocation, from its root thread and from a
// child thread spawned by the model, and after a restart too (it is
// stored with the root thread). RAP IN-1 (user_id), IN-5.
func TestIN1UserIDOnEveryInvocationOfASession(t *testing.T) {
	ts := newToolServer(t, "ids", tool("whoami"))
	var rootID atomic.Value
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		switch {
		case strings.Contains(in.user, "start"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSpawnThread, map[string]any{"instructions": "ask who I am", "child_of": []string{rootID.Load().(string)}})}}
		case in.resultName == BuiltinSpawnThread && strings.Contains(in.result, "Child thread spawned"),
			in.resultName == BuiltinSpawnThread && strings.Contains(in.result, "You are now inside"),
			strings.Contains(in.user, "again"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall("whoami", map[string]any{})}}
		}
		return &model.Response{Text: "ok"}
	}}
	e := newEnv(t, envOptions{model: m, servers: []string{ts.URL()}, tweak: func(c *Config) { c.DefaultUserID = "default-user" }})
	root := createThreadHTTP(t, e, `{"user_id": "alice@example.com"}`)
	rootID.Store(root)
	e.post(root, "start")
	first, second := ts.next(), ts.next()
	byThread := map[string]rap.Invocation{first.GroupID: first, second.GroupID: second}
	kids := e.children(root)
	if len(kids) != 1 {
		t.Fatalf("%d children, want 1", len(kids))
	}
	child := kids[0].ID
	for _, id := range []string{root, child} {
		inv, ok := byThread[id]
		if !ok {
			t.Fatalf("no invocation from thread %s; got %+v and %+v", id, first, second)
		}
		if inv.UserID != "alice@example.com" {
			t.Fatalf("invocation from thread %s has user_id %q, want alice@example.com", id, inv.UserID)
		}
	}
	if got := e.thread(root).UserID; got != "alice@example.com" {
		t.Fatalf("stored root thread user id = %q", got)
	}

	// Durable: after a restart (nothing cached) the child's next call
	// still carries the session's user id.
	e.idle(root)
	e.idle(child)
	e.restart()
	e.post(child, "again")
	if inv := ts.next(); inv.GroupID != child || inv.UserID != "alice@example.com" {
		t.Fatalf("after restart: invocation from %s with user_id %q, want %s with alice@example.com", inv.GroupID, inv.UserID, child)
	}

	// Without a user_id the session gets the configured default.
	other := createThreadHTTP(t, e, `{}`)
	e.post(other, "again")
	if inv := ts.next(); inv.GroupID != other || inv.UserID != "default-user" {
		t.Fatalf("default session: invocation from %s with user_id %q, want default-user", inv.GroupID, inv.UserID)
	}
}

// A user id the runtime cannot pass on faithfully is
// refused with 400 and creates nothing.
func TestCreateThreadRefusesBadUserID(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, body := range []string{`{"user_id": "a\nb"}`, `{"user_id": "` + strings.Repeat("x", MaxUserIDBytes+1) + `"}`, `{"user_id": 7}`} {
		resp, err := http.Post(e.srv.URL+"/v1/threads", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("POST /v1/threads %.40s…: status %d, want 400", body, resp.StatusCode)
		}
	}
	ths, err := e.rt.Threads(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ths) != 0 {
		t.Fatalf("bad user ids created threads: %+v", ths)
	}
	_ = store.Thread{}
}
