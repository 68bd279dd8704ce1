package raptest

import (
	"net/http"
	"testing"

	"github.com/gorap/gorap/rap"
)

// Over HTTP: a tool written against the reference sends a
// tool_result with neither text nor content, and a user_choice without
// default; the runtime accepts both (RAP RE-1, UC-1).
func TestReferenceStyleCallbacksAccepted(t *testing.T) {
	ctx := testContext(t)
	statuses := make(chan int, 2)
	ft := newFakeTool(t, func(inv *rap.Invocation, post func(any) int) {
		statuses <- post(map[string]any{"type": "user_choice", "group_id": inv.GroupID, "id": inv.ID,
			"prompt": "Go?", "choices": []string{"yes", "no"}, "response_url": "http://127.0.0.1:1/choice"})
		statuses <- post(map[string]any{"type": "tool_result", "group_id": inv.GroupID, "id": inv.ID})
	})
	rt := NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, ft.srv.URL, "echo", map[string]any{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "" || len(res.Content) != 0 {
		t.Errorf("result = %+v, want an empty one", res)
	}
	for range 2 {
		if s := <-statuses; s != http.StatusOK {
			t.Errorf("a callback was answered %d, want 200", s)
		}
	}
	msgs := call.Messages()
	if uc, ok := msgs[0].(*rap.UserChoice); !ok || uc.Default != 0 {
		t.Errorf("first message %#v, want a user_choice with default 0", msgs[0])
	}
	if errs := rt.Errors(); len(errs) != 0 {
		t.Errorf("Errors = %v", errs)
	}
}
