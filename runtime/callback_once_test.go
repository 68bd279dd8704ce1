package runtime

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// TestRE6ConcurrentResultsAddedOnce: the same call's result delivered by
// 16 concurrent POSTs (a tool retrying through a load balancer) appears
// once, on SQLite and on PostgreSQL, where the 16 transactions really run
// at once. The result's key is no longer kept once the result is consumed
// (store.InboxItem.Once): what makes it unique is the conditional move of
// the call from pending to done, which only one transaction wins (RAP RE-6).
func TestRE6ConcurrentResultsAddedOnce(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			ts := newToolServer(t, "jobs", tool("job"))
			e := newEnv(t, envOptions{postgres: pg, servers: []string{ts.URL()}, turns: []scripted.Turn{
				{ToolCalls: []scripted.Call{call("job", `{}`)}},
				{Text: "got {{last_result}}", Repeat: true},
			}})
			th := e.newThread()
			e.post(th, "start")
			inv := ts.next()
			e.idle(th)

			const n = 16
			var wg sync.WaitGroup
			var mu sync.Mutex
			accepted, duplicates := 0, 0
			for i := range n {
				wg.Go(func() {
					status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: fmt.Sprintf("r%d", i)})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case status != http.StatusOK:
						t.Errorf("delivery %d: %d %s", i, status, body)
					case strings.Contains(body, "duplicate"):
						duplicates++
					default:
						accepted++
					}
				})
			}
			wg.Wait()
			if accepted != 1 || duplicates != n-1 {
				t.Fatalf("%d deliveries accepted and %d answered duplicate; want 1 and %d", accepted, duplicates, n-1)
			}
			e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got r") })
			e.idle(th)
			if rs := results(e.history(th)); len(rs) != 1 {
				t.Fatalf("results = %+v, want exactly one", rs)
			}
			// Delivered again once the result was consumed: still a duplicate.
			if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "late"}); status != http.StatusOK || !strings.Contains(body, "duplicate") {
				t.Fatalf("delivery after the result was consumed: %d %s", status, body)
			}
			e.idle(th)
			if rs := results(e.history(th)); len(rs) != 1 {
				t.Fatalf("after a late delivery, results = %+v, want exactly one", rs)
			}
		})
	}
}
