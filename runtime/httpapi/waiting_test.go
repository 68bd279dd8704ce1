package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// waitingEngine records the limit it is asked for and the caller's user.
type waitingEngine struct {
	fakeEngine
	limit int
	user  string
}

func (e *waitingEngine) Waiting(ctx context.Context, limit int) (api.WaitingResponse, error) {
	e.limit = limit
	e.user, _ = api.ScopedUser(ctx)
	return api.WaitingResponse{}, nil
}

// GET /v1/waiting passes ?limit= (the default when absent, capped at the
// most) and the caller on to the engine, answers an empty list as [],
// refuses a limit that is not a positive number with 400 naming it, and
// is absent for an Engine that lists no waiting threads.
func TestWaitingRoute(t *testing.T) {
	e := &waitingEngine{}
	h := New(e, nil)
	ctx := context.Background()
	for q, want := range map[string]int{"": api.DefaultWaitingLimit, "?limit=7": 7, "?limit=100000": api.MaxWaitingLimit} {
		w := do(h, ctx, "GET", "/v1/waiting"+q, "", nil)
		var resp api.WaitingResponse
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.Threads == nil || e.limit != want {
			t.Errorf("GET /v1/waiting%s: %d %s, limit %d; want 200 with threads [] and limit %d", q, w.Code, w.Body, e.limit, want)
		}
	}
	for _, bad := range []string{"0", "-1", "ten"} {
		if w := do(h, ctx, "GET", "/v1/waiting?limit="+bad, "", nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `limit \"`+bad+`\"`) {
			t.Errorf("limit %s: %d %s, want 400 naming it", bad, w.Code, w.Body)
		}
	}
	do(h, api.WithCaller(ctx, api.Caller{UserID: "alice"}), "GET", "/v1/waiting", "", nil)
	if e.user != "alice" {
		t.Errorf("the engine saw user %q, want alice's caller", e.user)
	}
	if w := do(New(&fakeEngine{}, nil), ctx, "GET", "/v1/waiting", "", nil); w.Code != http.StatusNotFound {
		t.Errorf("an Engine without Waiting: %d, want 404", w.Code)
	}
}
