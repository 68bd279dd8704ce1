package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// remoteEngine knows the remotes "zeta" and "alpha" and a session "gone"
// (threads "gone" and "gone-child") that moved to https://b.example.
type remoteEngine struct {
	fakeEngine
	SessionMover // methods the tests do not call panic
}

func (e *remoteEngine) RemoteNames() []string { return []string{"alpha", "zeta"} }

func (e *remoteEngine) MovedTo(id string) (string, bool) {
	if id == "gone" || id == "gone-child" {
		return "https://b.example", true
	}
	return "", false
}

// GET /v1/remotes answers the remotes' names, and a caller bound to one
// user, who may not move sessions, 403; without a RemoteLister the route
// does not exist.
func TestRemotesNamesOnly(t *testing.T) {
	h := New(&remoteEngine{}, nil)
	w := do(h, context.Background(), "GET", "/v1/remotes", "", nil)
	var resp api.RemotesResponse
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil || strings.Join(resp.Remotes, ",") != "alpha,zeta" {
		t.Errorf("GET /v1/remotes: %d %s, want 200 with alpha and zeta", w.Code, w.Body)
	}
	alice := api.WithCaller(context.Background(), api.Caller{UserID: "alice"})
	if w := do(h, alice, "GET", "/v1/remotes", "", nil); w.Code != http.StatusForbidden {
		t.Errorf("GET /v1/remotes for a caller bound to a user: %d %s, want 403", w.Code, w.Body)
	}
	if w := do(New(&fakeEngine{}, nil), context.Background(), "GET", "/v1/remotes", "", nil); w.Code != http.StatusNotFound {
		t.Errorf("GET /v1/remotes of an engine without remotes: %d %s, want 404", w.Code, w.Body)
	}
}

// An engine that lists no remotes answers an empty list, not null.
func TestRemotesEmptyIsAList(t *testing.T) {
	h := New(&noRemotes{}, nil)
	w := do(h, context.Background(), "GET", "/v1/remotes", "", nil)
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"remotes":[]}` {
		t.Errorf("GET /v1/remotes with none: %d %s, want 200 {\"remotes\":[]}", w.Code, w.Body)
	}
}

type noRemotes struct{ fakeEngine }

func (*noRemotes) RemoteNames() []string { return nil }

// GET /v1/moved/{id} answers 200 with the destination's base URL for any
// thread of a session that moved away, without a redirect, and 404 for a
// thread that did not move; the session's own routes still answer 308.
func TestMovedAnswersWhereWithoutRedirect(t *testing.T) {
	h := New(&remoteEngine{}, nil)
	for _, id := range []string{"gone", "gone-child"} {
		w := do(h, context.Background(), "GET", "/v1/moved/"+id, "", nil)
		var resp api.MovedToResponse
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.MovedTo != "https://b.example" || w.Header().Get("Location") != "" {
			t.Errorf("GET /v1/moved/%s: %d %s (Location %q), want 200 moved to https://b.example and no redirect", id, w.Code, w.Body, w.Header().Get("Location"))
		}
	}
	w := do(h, context.Background(), "GET", "/v1/moved/t1", "", nil)
	var er api.ErrorResponse
	if w.Code != http.StatusNotFound || json.Unmarshal(w.Body.Bytes(), &er) != nil || !strings.Contains(er.Error, "did not move") {
		t.Errorf("GET /v1/moved/t1: %d %s, want 404 saying it did not move", w.Code, w.Body)
	}
	if w := do(h, context.Background(), "GET", "/v1/threads/gone", "", nil); w.Code != http.StatusPermanentRedirect {
		t.Errorf("GET /v1/threads/gone: %d, want 308", w.Code)
	}
	if w := do(New(&fakeEngine{}, nil), context.Background(), "GET", "/v1/moved/gone", "", nil); w.Code != http.StatusNotFound {
		t.Errorf("GET /v1/moved of an engine that does not move sessions: %d, want 404", w.Code)
	}
}
