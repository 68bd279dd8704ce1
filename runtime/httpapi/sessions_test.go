package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// sessionEngine deletes sessions as a runtime with a root "root" (two
// threads, the other being "child"), a moving session "moving" and
// nothing else; it lists users' threads by user id.
type sessionEngine struct {
	fakeEngine
	deleted bool
	listed  string
}

func (e *sessionEngine) DeleteSession(ctx context.Context, id string) (int, error) {
	switch {
	case id == "root" && !e.deleted:
		e.deleted = true
		return 2, nil
	case id == "child":
		return 0, fmt.Errorf("%w: thread child belongs to session root; delete the session", api.ErrBadInput)
	case id == "moving":
		return 0, fmt.Errorf("session moving: %w", api.ErrSessionMoving)
	}
	return 0, fmt.Errorf("%w %q", api.ErrUnknownThread, id)
}

func (e *sessionEngine) UserThreadsPage(ctx context.Context, user, cursor string, limit int) (api.ThreadPage, error) {
	e.listed = user
	return api.ThreadPage{Threads: []api.Thread{{ID: "root", RootID: "root", UserID: user}}}, nil
}

// DELETE /v1/threads/{id} answers 200 with the number of threads deleted,
// 404 for an unknown (or already deleted) session, 400 for a child
// thread and 409 for a moving session.
func TestDeleteSessionStatuses(t *testing.T) {
	e := &sessionEngine{}
	h := New(e, nil)
	ctx := context.Background()
	// Like every request that changes something, a DELETE says it is
	// JSON (the web guard refuses it otherwise).
	jsonType := map[string]string{"Content-Type": "application/json"}
	w := do(h, ctx, "DELETE", "/v1/threads/root", "", jsonType)
	var resp api.DeleteSessionResponse
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.DeletedThreads != 2 {
		t.Errorf("DELETE root: %d %s, want 200 {\"deleted_threads\":2}", w.Code, w.Body)
	}
	for _, c := range []struct {
		id     string
		status int
	}{
		{"root", http.StatusNotFound}, // deleted already
		{"nope", http.StatusNotFound},
		{"child", http.StatusBadRequest},
		{"moving", http.StatusConflict},
	} {
		w := do(h, ctx, "DELETE", "/v1/threads/"+c.id, "", jsonType)
		var er api.ErrorResponse
		if w.Code != c.status || json.Unmarshal(w.Body.Bytes(), &er) != nil || er.Error == "" {
			t.Errorf("DELETE %s: %d %s, want %d with an error message", c.id, w.Code, w.Body, c.status)
		}
	}
}

// GET /v1/threads?user_id= lists that user's threads; an empty user_id,
// or one with parent_id, is refused with 400.
func TestListThreadsByUser(t *testing.T) {
	e := &sessionEngine{}
	h := New(e, nil)
	ctx := context.Background()
	w := do(h, ctx, "GET", "/v1/threads?user_id=ada", "", nil)
	var page api.ThreadPage
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &page) != nil || len(page.Threads) != 1 || e.listed != "ada" {
		t.Errorf("GET ?user_id=ada: %d %s (listed %q), want 200 with ada's thread", w.Code, w.Body, e.listed)
	}
	for _, q := range []string{"user_id=", "user_id=ada&parent_id=root"} {
		if w := do(h, ctx, "GET", "/v1/threads?"+q, "", nil); w.Code != http.StatusBadRequest {
			t.Errorf("GET ?%s: %d %s, want 400", q, w.Code, w.Body)
		}
	}
}
