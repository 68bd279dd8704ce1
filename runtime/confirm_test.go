package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// With ConfirmDestructive, a call of a tool annotated destructive (RAP
// TS-3) waits for the user's choice (Allow / Deny, default Deny) through
// the client API; Deny ends it with an error result and the tool is never
// invoked; Allow invokes it; the question survives a restart; tools that
// are not destructive are not asked about.
func TestConfirmDestructiveTools(t *testing.T) {
	var wipes, reads atomic.Int32
	srv := rap.NewServer("files", &rap.ServerOptions{Logger: discardLogger()})
	rap.AddTool(srv, &rap.Tool{Name: "wipe", Description: "deletes everything", Annotations: &rap.Annotations{Destructive: true}},
		func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			wipes.Add(1)
			return rap.Text("wiped"), nil
		})
	rap.AddTool(srv, &rap.Tool{Name: "read", Description: "reads"},
		func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			reads.Add(1)
			return rap.Text("read ok"), nil
		})
	url := sdkServer(t, srv)
	e := newEnv(t, envOptions{servers: []string{url}, tweak: func(c *Config) { c.ConfirmDestructive = true }, turns: []scripted.Turn{
		{When: &scripted.When{UserContains: "wipe", LastInput: "user"}, ToolCalls: []scripted.Call{call("wipe", `{}`)}, Repeat: true},
		{When: &scripted.When{UserContains: "read", LastInput: "user"}, ToolCalls: []scripted.Call{call("read", `{}`)}, Repeat: true},
		{Text: "said: {{last_result}}", Repeat: true},
	}})
	th := e.newThread()
	live := sseClient(t, e.srv.URL, th)

	ask := func() string {
		e.post(th, "wipe it")
		ev := nextSSE(t, live, EventUserChoice)
		var choice struct {
			CallID  string   `json:"call_id"`
			Prompt  string   `json:"prompt"`
			Choices []string `json:"choices"`
			Default int      `json:"default"`
		}
		json.Unmarshal([]byte(ev.data), &choice)
		if !strings.Contains(choice.Prompt, "wipe") || !strings.Contains(choice.Prompt, "destructive") ||
			strings.Join(choice.Choices, "/") != "Allow/Deny" || choice.Default != 1 || strings.Contains(ev.data, "rap-runtime") {
			t.Fatalf("user_choice event = %s", ev.data)
		}
		if wipes.Load() != 0 {
			t.Fatal("the destructive tool ran before the user chose")
		}
		return choice.CallID
	}

	// Deny: an error result, the tool never invoked.
	id := ask()
	if status, body := callback(t, e.srv.URL+"/v1/threads/"+th+"/choices/"+id, `{"selected": 1}`); status != http.StatusOK {
		t.Fatalf("deny: %d %s", status, body)
	}
	e.waitHistory(th, "denied", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "the user denied running wipe") })
	e.idle(th)
	if wipes.Load() != 0 {
		t.Fatal("a denied destructive tool ran")
	}

	// The question survives a restart; then Allow invokes the tool.
	id = ask()
	e.restart()
	choices, err := e.rt.PendingChoices(context.Background(), th)
	if err != nil || len(choices) != 1 || choices[0].CallID != id {
		t.Fatalf("after restart: %+v %v", choices, err)
	}
	if wipes.Load() != 0 {
		t.Fatal("the restart dispatched an unconfirmed destructive call")
	}
	if status, body := callback(t, e.srv.URL+"/v1/threads/"+th+"/choices/"+id, `{"selected": 0}`); status != http.StatusOK {
		t.Fatalf("allow: %d %s", status, body)
	}
	e.waitHistory(th, "wiped", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "said: wiped") })
	e.idle(th)
	if wipes.Load() != 1 {
		t.Fatalf("wipe ran %d times", wipes.Load())
	}

	// A dispatch of the call that started before the answer and runs only
	// after the allowed one sent it (Start's, after the restart) neither
	// asks again nor invokes again. (Seen in CI under the race detector: a
	// second question for a call already sent.)
	var sent store.Call
	if err := e.rt.store.View(context.Background(), func(tx store.Tx) (err error) { sent, err = tx.Call(th, id); return err }); err != nil {
		t.Fatal(err)
	}
	sent.State = store.CallNew // as Start read it
	e.rt.dispatch(context.Background(), sent, nil)
	if choices, _ := e.rt.PendingChoices(context.Background(), th); len(choices) != 0 || wipes.Load() != 1 {
		t.Fatalf("a late dispatch of the allowed call: choices %+v, wipe ran %d times", choices, wipes.Load())
	}

	// A tool that is not destructive is not asked about.
	e.post(th, "read it")
	e.waitHistory(th, "read", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "said: read ok") })
	if choices, _ := e.rt.PendingChoices(context.Background(), th); len(choices) != 0 {
		t.Fatalf("choices %+v", choices)
	}
}
