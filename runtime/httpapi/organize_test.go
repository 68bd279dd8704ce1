package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// organizer is a fakeEngine that is an Organizer: it records the query
// and update it got.
type organizer struct {
	fakeEngine
	query  api.ThreadQuery
	update api.UpdateThreadRequest
}

func (o *organizer) FindThreads(ctx context.Context, q api.ThreadQuery) (api.ThreadPage, error) {
	o.query = q
	return api.ThreadPage{Threads: []api.Thread{{ID: "t1", Title: "found"}}}, nil
}

func (o *organizer) UpdateThread(ctx context.Context, id string, req api.UpdateThreadRequest) (api.Thread, error) {
	o.update = req
	return api.Thread{ID: id, Title: "renamed"}, nil
}

// lister is a fakeEngine that is no Organizer.
type lister struct{ fakeEngine }

func (l *lister) ThreadsPage(ctx context.Context, parent, cursor string, limit int) (api.ThreadPage, error) {
	return api.ThreadPage{Threads: []api.Thread{{ID: "t1"}}}, nil
}

// GET /v1/threads hands every parameter to an Organizer's FindThreads;
// PATCH /v1/threads/{id} decodes its body strictly (an unknown member is
// 400) and, for a caller bound to a user, answers another user's thread
// 404 before reading the body.
func TestOrganizerRoutes(t *testing.T) {
	o := &organizer{}
	h := New(o, nil)
	ctx := context.Background()
	w := do(h, ctx, "GET", "/v1/threads?q=deploy+db&archived=only&cursor=c1&limit=5&parent_id=p1", "", nil)
	want := api.ThreadQuery{ParentID: "p1", Cursor: "c1", Limit: 5, Query: "deploy db", Archived: api.ArchivedOnly}
	if w.Code != http.StatusOK || o.query != want || !strings.Contains(w.Body.String(), `"title":"found"`) {
		t.Errorf("GET with every parameter: %d %s, query %+v; want 200 and %+v", w.Code, w.Body, o.query, want)
	}
	if w := do(h, ctx, "GET", "/v1/threads?user_id=ann&parent_id=p1", "", nil); w.Code != http.StatusBadRequest {
		t.Errorf("user_id with parent_id: %d, want 400", w.Code)
	}
	w = do(h, ctx, "PATCH", "/v1/threads/t1", `{"title":"x","archived":false}`, nil)
	if w.Code != http.StatusOK || o.update.Title == nil || *o.update.Title != "x" || o.update.Archived == nil || *o.update.Archived {
		t.Errorf("PATCH: %d %s, update %+v", w.Code, w.Body, o.update)
	}
	w = do(h, ctx, "PATCH", "/v1/threads/t1", `{"titel":"x"}`, nil)
	var er api.ErrorResponse
	if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &er) != nil || !strings.Contains(er.Error, `unknown field "titel"`) {
		t.Errorf("PATCH with an unknown member: %d %s; want 400 naming it", w.Code, w.Body)
	}
	o.update = api.UpdateThreadRequest{}
	bob := api.WithCaller(ctx, api.Caller{UserID: "bob"})
	if w := do(h, bob, "PATCH", "/v1/threads/t1", `{"title":"x"}`, nil); w.Code != http.StatusNotFound || o.update.Title != nil {
		t.Errorf("PATCH of alice's thread as bob: %d, update %+v; want 404 and nothing done", w.Code, o.update)
	}
}

// An Engine that is no Organizer lists every thread (archived=include
// asks no more), refuses q= and another archived= with 400 rather than
// ignore them, and serves no PATCH.
func TestListWithoutOrganizer(t *testing.T) {
	h := New(&lister{}, nil)
	ctx := context.Background()
	for path, status := range map[string]int{
		"/v1/threads":                  http.StatusOK,
		"/v1/threads?archived=include": http.StatusOK,
		"/v1/threads?q=x":              http.StatusBadRequest,
		"/v1/threads?archived=only":    http.StatusBadRequest,
	} {
		if w := do(h, ctx, "GET", path, "", nil); w.Code != status {
			t.Errorf("GET %s: %d %s, want %d", path, w.Code, w.Body, status)
		}
	}
	if w := do(h, ctx, "PATCH", "/v1/threads/t1", `{"title":"x"}`, nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("PATCH without an Organizer: %d, want 405", w.Code)
	}
}
