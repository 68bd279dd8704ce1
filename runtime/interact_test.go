package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// sdkServer starts srv over real HTTP and returns its URL.
func sdkServer(t *testing.T, srv *rap.Server) string {
	t.Helper()
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	url := newHTTPServer(t, srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return url
}

// sseClient reads a thread's event stream over HTTP.
func sseClient(t *testing.T, base, thread string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/threads/"+thread+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan sseEvent, 1000)
	go func() {
		defer resp.Body.Close()
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.typ != "":
				events <- ev
				ev = sseEvent{}
			}
		}
	}()
	return events
}

func nextSSE(t *testing.T, events <-chan sseEvent, typ string) sseEvent {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("stream ended before a %s event", typ)
			}
			if ev.typ == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", typ)
		}
	}
}

// RAP OA-1: an oauth message reaches clients with the link (also clients
// that connect later, while the call is pending); the call stays pending;
// the model is told authorization is in progress; the link is in neither
// the database nor the logs; the result then arrives as usual.
func TestOA1OAuthShownPendingNotStored(t *testing.T) {
	const secretURL = "https://auth.example.com/authorize?state=XYZ-SECRET-STATE"
	granted := make(chan struct{})
	srv := rap.NewServer("accounts", &rap.ServerOptions{Logger: discardLogger()})
	rap.AddTool(srv, &rap.Tool{Name: "login", Description: "logs in"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		if err := c.RequestOAuth(ctx, secretURL); err != nil {
			return nil, err
		}
		select {
		case <-granted:
			return rap.Text("logged in as ada"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	url := sdkServer(t, srv)
	e := newEnv(t, envOptions{servers: []string{url}, turns: []scripted.Turn{
		{AfterUser: "log me in", ToolCalls: []scripted.Call{call("login", `{}`)}},
		{When: &scripted.When{UserContains: "asked the user to authorize", LastInput: "user"}, Text: "please open the link I showed you"},
		// The result comes after the conversation moved on: a user note.
		{When: &scripted.When{UserContains: "logged in as ada"}, Text: "you are in"},
	}})
	th := e.newThread()
	live := sseClient(t, e.srv.URL, th)
	e.post(th, "log me in")
	ev := nextSSE(t, live, EventOAuth)
	if !strings.Contains(ev.data, `"auth_url":"`+secretURL+`"`) && !strings.Contains(ev.data, "XYZ-SECRET-STATE") {
		t.Fatalf("oauth event = %s", ev.data)
	}
	h := e.waitHistory(th, "the model's answer", func(h []store.Message) bool {
		return hasText(h, store.RoleAssistant, "please open the link")
	})
	reqs := e.model.requests()
	var callID string
	for _, c := range calls(h) {
		if c.Name == "login" {
			callID = c.ID
		}
	}
	if !requestHasResult(reqs[len(reqs)-1], callID, authPendingText) {
		t.Fatalf("the model was not told authorization is in progress: %+v", reqs[len(reqs)-1].Messages)
	}
	if st, err := callState(e, th, callID); err != nil || !st.Pending() {
		t.Fatalf("call state %v %v, want pending", st, err)
	}
	late := sseClient(t, e.srv.URL, th)
	if ev := nextSSE(t, late, EventOAuth); !strings.Contains(ev.data, "XYZ-SECRET-STATE") {
		t.Fatalf("a client connecting later did not get the pending link: %s", ev.data)
	}
	close(granted)
	e.waitHistory(th, "the result", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "you are in") })
	e.idle(th)
	prime, _ := e.rt.primeEvents(context.Background(), th)
	for _, p := range prime {
		if p.Type == EventOAuth {
			t.Fatal("the link is still shown after the result arrived")
		}
	}
	e.stop()
	files, _ := filepath.Glob(filepath.Join(e.dir, "rap.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("XYZ-SECRET-STATE")) {
			t.Fatalf("%s holds the auth URL (RAP OA-1)", f)
		}
	}
	if strings.Contains(e.logs.String(), "XYZ-SECRET-STATE") {
		t.Fatal("the auth URL reached the logs")
	}
}

// RAP UC-1, UC-2: a user choice reaches clients; a bad answer is refused
// and loses nothing; an answer is POSTed as {id, selected} to the tool's
// response_url; a dismissal sends the default; a choice is answered once.
func TestUC2UserChoice(t *testing.T) {
	srv := rap.NewServer("deployer", &rap.ServerOptions{Logger: discardLogger()})
	rap.AddTool(srv, &rap.Tool{Name: "deploy", Description: "deploys"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		i, err := c.AskUser(ctx, "Deploy where?", []string{"staging", "production"}, 0, 0)
		if err != nil {
			return nil, err
		}
		return rap.Text("deployed to " + []string{"staging", "production"}[i]), nil
	})
	url := sdkServer(t, srv)
	e := newEnv(t, envOptions{servers: []string{url}, turns: []scripted.Turn{
		{When: &scripted.When{UserContains: "deploy", LastInput: "user"}, ToolCalls: []scripted.Call{call("deploy", `{}`)}, Repeat: true},
		{Text: "{{last_result}}", Repeat: true},
	}})
	th := e.newThread()
	live := sseClient(t, e.srv.URL, th)
	answer := func(callID, body string) (int, string) {
		return callback(t, e.srv.URL+"/v1/threads/"+th+"/choices/"+callID, body)
	}
	for round, tc := range []struct {
		body, want string
	}{
		{`{"selected": 1}`, "deployed to production"},
		{`{"dismiss": true}`, "deployed to staging"},
	} {
		e.post(th, "deploy please")
		ev := nextSSE(t, live, EventUserChoice)
		var choice struct {
			CallID  string   `json:"call_id"`
			Prompt  string   `json:"prompt"`
			Choices []string `json:"choices"`
			Default int      `json:"default"`
		}
		json.Unmarshal([]byte(ev.data), &choice)
		if choice.Prompt != "Deploy where?" || len(choice.Choices) != 2 || choice.Default != 0 || strings.Contains(ev.data, "response_url") {
			t.Fatalf("user_choice event = %s", ev.data)
		}
		if round == 0 {
			if status, body := answer(choice.CallID, `{"selected": 7}`); status != http.StatusBadRequest || !strings.Contains(body, "index from 0 to 1") {
				t.Fatalf("out-of-range answer: %d %s", status, body)
			}
			choices, err := e.rt.PendingChoices(context.Background(), th)
			if err != nil || len(choices) != 1 {
				t.Fatalf("after a bad answer the choice must stay open: %+v %v", choices, err)
			}
		}
		if status, body := answer(choice.CallID, tc.body); status != http.StatusOK {
			t.Fatalf("answer %s: %d %s", tc.body, status, body)
		}
		if status, _ := answer(choice.CallID, `{"selected": 0}`); status != http.StatusNotFound {
			t.Fatalf("a second answer got %d, want 404 (answered once, RAP UC-2)", status)
		}
		e.waitHistory(th, tc.want, func(h []store.Message) bool { return hasText(h, store.RoleAssistant, tc.want) })
		e.idle(th)
	}
}

// RAP VU-2, RE-3: views are kept per (thread, view_type), streamed, and
// replayed to a client that connects; display_as reaches clients
// unchanged while the model gets the text.
func TestVU2ViewsAndDisplaySegments(t *testing.T) {
	srv := rap.NewServer("renderer", &rap.ServerOptions{Logger: discardLogger()})
	rap.AddTool(srv, &rap.Tool{Name: "render", Description: "renders"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		for _, pct := range []int{50, 100} {
			if err := c.UpdateView(ctx, "progress", map[string]int{"pct": pct}); err != nil {
				return nil, err
			}
		}
		if err := c.UpdateView(ctx, "summary", map[string]string{"files": "3"}); err != nil {
			return nil, err
		}
		return &rap.Reply{Text: "rendered 3 files", DisplayAs: []rap.DisplaySegment{rap.DiffSegment("a.go", "@@ -1 +1 @@\n-a\n+b\n"), rap.TextSegment("3 files")}}, nil
	})
	url := sdkServer(t, srv)
	e := newEnv(t, envOptions{servers: []string{url}, turns: []scripted.Turn{
		{AfterUser: "render", ToolCalls: []scripted.Call{call("render", `{}`)}},
		{Text: "model saw: {{last_result}}"},
	}})
	th := e.newThread()
	live := sseClient(t, e.srv.URL, th)
	e.post(th, "render it")
	if ev := nextSSE(t, live, EventView); !strings.Contains(ev.data, `"view_type":"progress"`) {
		t.Fatalf("view event = %s", ev.data)
	}
	res := nextSSE(t, live, EventToolResult)
	var got0 struct {
		DisplayAs []rap.DisplaySegment `json:"display_as"`
	}
	json.Unmarshal([]byte(res.data), &got0)
	want, _ := json.Marshal([]rap.DisplaySegment{rap.DiffSegment("a.go", "@@ -1 +1 @@\n-a\n+b\n"), rap.TextSegment("3 files")})
	if b, _ := json.Marshal(got0.DisplayAs); !bytes.Equal(b, want) {
		t.Fatalf("display_as changed on its way to clients:\n got %s\nwant %s", b, want)
	}
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "model saw: rendered 3 files") })
	late := sseClient(t, e.srv.URL, th)
	got := map[string]string{}
	for len(got) < 2 {
		ev := nextSSE(t, late, EventView)
		var v struct {
			ViewType string          `json:"view_type"`
			Content  json.RawMessage `json:"content"`
		}
		json.Unmarshal([]byte(ev.data), &v)
		got[v.ViewType] = string(v.Content)
	}
	if got["progress"] != `{"pct":100}` || got["summary"] != `{"files":"3"}` {
		t.Fatalf("views replayed on connect = %v, want the latest of each type", got)
	}
	for _, req := range e.model.requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Text, "pct") || len(m.ToolResults) > 0 && strings.Contains(m.ToolResults[0].Text, "diff") {
				t.Fatalf("a view or display segment reached the model: %+v", m)
			}
		}
	}
	var _ model.Provider = e.model
}
