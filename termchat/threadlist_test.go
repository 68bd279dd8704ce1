package termchat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// rap chat's and rap demo's thread listings follow
// GET /v1/threads page by page (next_cursor), of every thread or of one
// thread's children (parent_id).
func TestAPIClientFollowsThreadPages(t *testing.T) {
	pages := map[string][]string{"": {"a", "b"}, "c1": {"c", "d"}, "c2": {"e"}}
	next := map[string]string{"": "c1", "c1": "c2"}
	var parents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/threads" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		parents = append(parents, r.URL.Query().Get("parent_id"))
		cur := r.URL.Query().Get("cursor")
		var out struct {
			Threads    []api.Thread `json:"threads"`
			NextCursor string       `json:"next_cursor,omitempty"`
		}
		for _, id := range pages[cur] {
			out.Threads = append(out.Threads, api.Thread{ID: id})
		}
		out.NextCursor = next[cur]
		json.NewEncoder(w).Encode(out)
	}))
	defer srv.Close()
	api, err := NewHTTPAPI(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	list, err := api.Threads(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(list)); got != "[a b c d e]" {
		t.Fatalf("threads = %s, want every page", got)
	}
	parents = nil
	if _, err := api.Threads(context.Background(), "p1"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(parents) != "[p1 p1 p1]" {
		t.Fatalf("children asked with parent_id %v", parents)
	}
}

func ids(ts []api.Thread) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}
