package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

func do(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The client API: create, post, history, list, thread info.
func TestClientAPI(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "echo: {{last_user}}", Repeat: true}}})
	base := e.srv.URL + "/v1"
	status, body := do(t, "POST", base+"/threads", "")
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	var created struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(body), &created)
	if created.ID == "" {
		t.Fatalf("create answered %s", body)
	}
	status, body = do(t, "POST", base+"/threads/"+created.ID+"/messages", `{"text":"ping"}`)
	if status != http.StatusAccepted || !strings.Contains(body, "queued") {
		t.Fatalf("post: %d %s", status, body)
	}
	e.idle(created.ID)
	status, body = do(t, "GET", base+"/threads/"+created.ID+"/messages", "")
	var hist struct{ Messages []store.Message }
	json.Unmarshal([]byte(body), &hist)
	if status != 200 || len(hist.Messages) != 2 || hist.Messages[1].Text != "echo: ping" {
		t.Fatalf("history: %d %s", status, body)
	}
	status, body = do(t, "GET", base+"/threads", "")
	if status != 200 || !strings.Contains(body, created.ID) {
		t.Fatalf("list: %d %s", status, body)
	}
	status, body = do(t, "GET", base+"/threads/"+created.ID, "")
	if status != 200 || !strings.Contains(body, `"pending_calls":[]`) || !strings.Contains(body, `"queued":0`) {
		t.Fatalf("thread info: %d %s", status, body)
	}
	// last_seq is the Seq of the last saved message: a client compares it
	// with the message events it saw.
	if want := fmt.Sprintf(`"last_seq":%d`, hist.Messages[1].Seq); !strings.Contains(body, want) {
		t.Fatalf("thread info lacks %s: %s", want, body)
	}
}

// Bad input gets a clear 4xx and loses nothing already accepted; an
// Idempotency-Key replay adds nothing.
func TestClientAPIBadInput(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	th := e.newThread()
	e.post(th, "kept")
	e.idle(th)
	base := e.srv.URL + "/v1/threads/"
	cases := []struct {
		method, url, body string
		status            int
		want              string
	}{
		{"POST", base + th + "/messages", `{"text":""}`, 400, "empty"},
		{"POST", base + th + "/messages", `{}`, 400, `missing`},
		{"POST", base + th + "/messages", `{"txt":"x"}`, 400, "unknown field"},
		{"POST", base + th + "/messages", `not json`, 400, "not the expected JSON"},
		{"POST", base + th + "/messages", `{"text":"` + strings.Repeat("x", MaxMessageBytes+1) + `"}`, 400, "limit"},
		{"POST", base + th + "/messages", `{"text":"` + strings.Repeat("x", 2*MaxMessageBytes) + `"}`, 400, "larger than"},
		{"POST", base + "nope/messages", `{"text":"x"}`, 404, "unknown thread"},
		{"GET", base + "nope/messages", ``, 404, "unknown thread"},
		{"GET", base + "nope/events", ``, 404, "unknown thread"},
		{"GET", base + "nope", ``, 404, "unknown thread"},
	}
	for _, c := range cases {
		status, body := do(t, c.method, c.url, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s %.60s %.40q: %d %.200s; want %d with %q", c.method, c.url, c.body, status, body, c.status, c.want)
		}
	}
	for i := 0; i < 2; i++ {
		status, body := do(t, "POST", base+th+"/messages", `{"text":"once"}`, "Idempotency-Key", "abc")
		want := []string{"queued", "duplicate"}[i]
		if status != 202 || !strings.Contains(body, want) {
			t.Fatalf("idempotent post %d: %d %s", i, status, body)
		}
	}
	e.idle(th)
	var users []string
	for _, m := range e.history(th) {
		if m.Role == store.RoleUser {
			users = append(users, m.Text)
		}
	}
	if strings.Join(users, ",") != "kept,once" {
		t.Fatalf("user messages = %v", users)
	}
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct{ typ, data string }

// The event stream carries text deltas, messages, tool calls with their
// display text, tool results and status changes, as SSE.
func TestEventStream(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{Text: "let me check the clock", ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "It is {{last_result}}."},
	}})
	th := e.newThread()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/threads/"+th+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan sseEvent, 100)
	go func() {
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
	next := func(typ string) sseEvent {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("stream ended before a %s event", typ)
				}
				if ev.typ == typ {
					return ev
				}
			case <-time.After(waitFor):
				t.Fatalf("no %s event", typ)
			}
		}
	}
	if ev := next(EventToolsets); !strings.Contains(ev.data, `"loaded":["clock"]`) {
		t.Fatalf("toolsets event = %s", ev.data)
	}
	e.post(th, "time?")
	if ev := next(EventStatus); !strings.Contains(ev.data, "running") {
		t.Fatalf("status = %s", ev.data)
	}
	var text strings.Builder
	for text.String() != "let me check the clock" {
		ev := next(EventTextDelta)
		var d struct{ Text string }
		json.Unmarshal([]byte(ev.data), &d)
		text.WriteString(d.Text)
		if text.Len() > 100 {
			t.Fatalf("deltas = %q", text.String())
		}
	}
	if ev := next(EventToolCall); !strings.Contains(ev.data, `"display":"get_time({})"`) || !strings.Contains(ev.data, `"arguments":{}`) {
		t.Fatalf("tool_call = %s", ev.data)
	}
	inv := ts.next()
	reply(t, inv, "noon")
	if ev := next(EventToolResult); !strings.Contains(ev.data, `"text":"noon"`) || !strings.Contains(ev.data, inv.ID) {
		t.Fatalf("tool_result = %s", ev.data)
	}
	if ev := next(EventMessage); !strings.Contains(ev.data, `"role":"assistant"`) || !strings.Contains(ev.data, "It is noon.") {
		t.Fatalf("message = %s", ev.data)
	}
}

// New checks its configuration and names every problem.
func TestNewConfigErrors(t *testing.T) {
	_, err := New(&Config{PublicURL: "ftp://x", ToolTimeouts: map[string]time.Duration{"t": 0}})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, want := range []string{"Store is nil", "Model is nil", "Secret", "PublicURL", `ToolTimeouts["t"]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// New(nil) is an error naming what to give, and New fills in defaults on
// its own copy of the Config, never on the caller's.
func TestNewNilAndCallersConfigUnchanged(t *testing.T) {
	if _, err := New(nil); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Errorf("New(nil) = %v; want an error naming the required fields", err)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{Store: st, Model: scripted.New(nil), Secret: []byte("0123456789abcdef0123"), PublicURL: "http://127.0.0.1:1/"}
	before := fmt.Sprintf("%+v", cfg)
	if _, err := New(&cfg); err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprintf("%+v", cfg); after != before {
		t.Errorf("New changed the caller's Config:\nbefore %s\nafter  %s", before, after)
	}
}

// LoadOrCreateSecret creates 32 random bytes with mode 0600 once and
// returns the same bytes afterwards.
func TestLoadOrCreateSecret(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreateSecret(dir)
	if err != nil || len(a) != 32 {
		t.Fatalf("%d bytes, %v", len(a), err)
	}
	b, err := LoadOrCreateSecret(dir)
	if err != nil || string(a) != string(b) {
		t.Fatalf("second load differs: %v", err)
	}
	st, err := statMode(dir + "/callback.key")
	if err != nil || st != 0o600 {
		t.Fatalf("mode %o, %v", st, err)
	}
}
