package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// statefulServer is a tool server whose toolset needs migration and whose
// /migrate answers as migrate says; it has one tool nobody calls.
func statefulServer(t *testing.T, migrate func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	var url string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case rap.WellKnownPath:
			json.NewEncoder(w).Encode(rap.Toolset{Name: "state", Endpoint: url + "/invoke", NeedsMigration: true, Tools: []rap.Tool{tool("keep")}})
		case rap.MigratePath:
			// Read the body: only then does the server notice a client
			// that gave up, and end the request's context.
			io.ReadAll(r.Body)
			migrate(w, r)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	url = srv.URL
	t.Cleanup(srv.Close)
	return url
}

var abortTurns = []scripted.Turn{{AfterUser: "still here?", Text: "yes, here"}, {Text: "ok", Repeat: true}}

// moveMust fails the test unless moving th from src to dst fails with an
// error wrapping api.ErrMoveFailed and containing want.
func moveMustFail(t *testing.T, src *env, th, to, want string) {
	t.Helper()
	_, err := src.rt.MoveSession(context.Background(), th, api.MoveRequest{To: to})
	if !errors.Is(err, api.ErrMoveFailed) || !strings.Contains(err.Error(), want) {
		t.Fatalf("move: %v; want a failed move saying %q", err, want)
	}
}

// checkStayed fails the test unless th is still served by src (a message
// gets its answer there) and dst holds nothing of it.
func checkStayed(t *testing.T, src, dst *env, th string) {
	t.Helper()
	src.post(th, "still here?")
	src.waitHistory(th, "the answer at the source after the failed move", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "yes, here")
	})
	err := dst.rt.store.View(context.Background(), func(tx store.Tx) error {
		if _, err := tx.Thread(th); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the destination holds thread %s after the failed move: %v", th, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, moved := src.rt.MovedTo(th); moved {
		t.Errorf("the source says the session moved")
	}
}

// RAP MI-2: any failure aborts the whole move. A tool server answering
// /migrate with 500, one that does not answer in time, and a destination
// without the toolset each leave the session at the source, which goes on
// with what arrived meanwhile (a message posted while the move waited),
// and nothing of it at the destination; the error says why.
func TestFailedMoveLeavesTheSessionAtTheSource(t *testing.T) {
	t.Run("migrate answers 500", func(t *testing.T) {
		var src *env
		var th string
		posted := make(chan struct{})
		stateA := statefulServer(t, func(w http.ResponseWriter, r *http.Request) {
			// A message arrives while the move waits: it is kept.
			if err := src.rt.PostMessage(context.Background(), th, "during the move"); err != nil {
				t.Errorf("a message posted during the move: %v; want it kept", err)
			}
			close(posted)
			http.Error(w, `{"error":"disk full"}`, http.StatusInternalServerError)
		})
		src = newEnv(t, envOptions{turns: abortTurns, servers: []string{stateA}})
		dst := newEnv(t, envOptions{turns: abortTurns, servers: []string{statefulServer(t, nil)}})
		th = src.newThread()
		moveMustFail(t, src, th, dst.srv.URL, "disk full")
		<-posted
		h := src.waitHistory(th, "the message posted during the move", func(h []store.Message) bool {
			return hasText(h, store.RoleUser, "during the move")
		})
		if !hasText(h, store.RoleUser, "during the move") {
			t.Fatal("lost")
		}
		checkStayed(t, src, dst, th)
	})
	t.Run("migrate times out", func(t *testing.T) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		stateA := statefulServer(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		src := newEnv(t, envOptions{turns: abortTurns, servers: []string{stateA}})
		dst := newEnv(t, envOptions{turns: abortTurns, servers: []string{statefulServer(t, nil)}})
		src.rt.testMigrateTimeout.Store(int64(300 * time.Millisecond))
		th := src.newThread()
		moveMustFail(t, src, th, dst.srv.URL, "deadline exceeded")
		checkStayed(t, src, dst, th)
	})
	t.Run("destination lacks the toolset", func(t *testing.T) {
		src := newEnv(t, envOptions{turns: abortTurns, servers: []string{statefulServer(t, func(w http.ResponseWriter, r *http.Request) {
			t.Error("/migrate was called although the move could not succeed")
		})}})
		dst := newEnv(t, envOptions{turns: abortTurns})
		th := src.newThread()
		moveMustFail(t, src, th, dst.srv.URL, "toolset state")
		checkStayed(t, src, dst, th)
	})
	t.Run("destination refuses the token", func(t *testing.T) {
		src := newEnv(t, envOptions{turns: abortTurns})
		dst := newEnv(t, envOptions{turns: abortTurns, tweak: func(c *Config) {
			c.ClientAuth = func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, `{"error":"bad token"}`, http.StatusUnauthorized)
				})
			}
		}})
		th := src.newThread()
		moveMustFail(t, src, th, dst.srv.URL, "refused the token")
		checkStayed(t, src, dst, th)
	})
}

// A session on a store several processes share is not moved (its pause
// would hold in one process only): the refusal says what to do instead,
// and the session goes on.
func TestMoveOutOfASharedStoreIsRefused(t *testing.T) {
	src := newEnv(t, envOptions{turns: abortTurns, postgres: true})
	dst := newEnv(t, envOptions{turns: abortTurns})
	th := src.newThread()
	_, err := src.rt.MoveSession(context.Background(), th, api.MoveRequest{To: dst.srv.URL})
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "rap export") {
		t.Fatalf("move out of a shared store: %v; want a conflict pointing at rap export", err)
	}
	checkStayed(t, src, dst, th)
}

// A session moves away and back: the runtime it returns to takes it
// again (dropping its forwarding record), the other keeps one, and the
// conversation goes on at each stop.
func TestSessionMovesAwayAndBack(t *testing.T) {
	turns := []scripted.Turn{{AfterUser: "one", Text: "reply one"}, {AfterUser: "two", Text: "reply two"}, {AfterUser: "three", Text: "reply three"}, {Text: "ok", Repeat: true}}
	a := newEnv(t, envOptions{turns: turns})
	b := newEnv(t, envOptions{turns: turns})
	ctx := context.Background()
	th := a.newThread()
	a.post(th, "one")
	a.waitHistory(th, "reply one", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "reply one") })
	a.idle(th)
	if _, err := a.rt.MoveSession(ctx, th, api.MoveRequest{To: b.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.post(th, "two")
	b.waitHistory(th, "reply two", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "reply two") })
	b.idle(th)
	if _, err := b.rt.MoveSession(ctx, th, api.MoveRequest{To: a.srv.URL}); err != nil {
		t.Fatalf("the move back: %v", err)
	}
	if _, moved := a.rt.MovedTo(th); moved {
		t.Fatal("the runtime the session came back to still forwards it")
	}
	if to, moved := b.rt.MovedTo(th); !moved || to != a.srv.URL {
		t.Fatalf("the runtime the session left again: MovedTo = %q, %v; want %s", to, moved, a.srv.URL)
	}
	a.post(th, "three")
	h := a.waitHistory(th, "reply three", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "reply three") })
	for _, want := range []string{"reply one", "reply two", "reply three"} {
		if !hasText(h, store.RoleAssistant, want) {
			t.Fatalf("after two moves the history lacks %q:\n%s", want, dump(h))
		}
	}
}
