package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// A user input reaches clients as a user_input event and in ThreadInfo;
// answers that do not fit the form are refused naming the field and
// lose nothing; the input survives a restart; the answer is POSTed as
// {id, values} to the tool's response_url, a dismissal as {id,
// dismissed}; an input is answered once. On SQLite and PostgreSQL.
func TestUserInputAnswered(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { testUserInputAnswered(t, pg) })
	}
}

func testUserInputAnswered(t *testing.T, pg bool) {
	srv := rap.NewServer("signup", &rap.ServerOptions{Logger: discardLogger()})
	fields := []rap.InputField{
		{Name: "email", Title: "Email", Type: rap.InputString, Required: true, Format: rap.FormatEmail},
		{Name: "seats", Type: rap.InputInteger, Minimum: new(float64)},
	}
	rap.AddTool(srv, &rap.Tool{Name: "signup", Description: "signs up"}, func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
		a, err := c.AskInput(ctx, "Your details", fields, 0)
		if err != nil {
			return nil, err
		}
		if a.Dismissed {
			return rap.Text("signup dismissed"), nil
		}
		b, _ := json.Marshal(a.Values)
		return rap.Text("signed up " + string(b)), nil
	})
	url := sdkServer(t, srv)
	e := newEnv(t, envOptions{servers: []string{url}, postgres: pg, turns: []scripted.Turn{
		{When: &scripted.When{UserContains: "signup", LastInput: "user"}, ToolCalls: []scripted.Call{call("signup", `{}`)}, Repeat: true},
		{Text: "{{last_result}}", Repeat: true},
	}})
	th := e.newThread()
	answer := func(callID, body string) (int, string) {
		return callback(t, e.srv.URL+"/v1/threads/"+th+"/inputs/"+callID, body)
	}
	ctx := context.Background()
	for round, tc := range []struct {
		body, want string
	}{
		{`{"values": {"email": "ann@example.com", "seats": 3}}`, `signed up {"email":"ann@example.com","seats":3}`},
		{`{"dismiss": true}`, "signup dismissed"},
	} {
		live := sseClient(t, e.srv.URL, th)
		e.post(th, "signup please")
		ev := nextSSE(t, live, EventUserInput)
		var input struct {
			CallID string           `json:"call_id"`
			Prompt string           `json:"prompt"`
			Fields []rap.InputField `json:"fields"`
		}
		json.Unmarshal([]byte(ev.data), &input)
		if input.Prompt != "Your details" || len(input.Fields) != 2 || !input.Fields[0].Required || strings.Contains(ev.data, "response_url") {
			t.Fatalf("user_input event = %s", ev.data)
		}
		if round == 0 {
			for body, say := range map[string]string{
				`{"values": {"seats": 3}}`:                               "values.email: is required",
				`{"values": {"email": "ann@example.com", "seats": "3"}}`: "values.seats: must be a number",
				`{"values": {"email": "ann@example.com", "seats": -1}}`:  "values.seats",
				`{"values": {"email": "not an address"}}`:                "values.email",
				`{"values": {"email": "ann@example.com", "x": 1}}`:       "values.x",
				`{}`:                              "dismiss",
				`{"values": {}, "dismiss": true}`: "not both",
			} {
				if status, got := answer(input.CallID, body); status != http.StatusBadRequest || !strings.Contains(got, say) {
					t.Errorf("answer %s: %d %s, want 400 mentioning %q", body, status, got, say)
				}
			}
			if status, _ := callback(t, e.srv.URL+"/v1/threads/"+th+"/choices/"+input.CallID, `{"selected": 0}`); status != http.StatusNotFound {
				t.Errorf("answering the input as a choice got %d, want 404", status)
			}
			e.restart()
			info, err := e.rt.ThreadInfo(ctx, th)
			if err != nil || len(info.Inputs) != 1 || len(info.Choices) != 0 || info.Inputs[0].Fields[0].Name != "email" {
				t.Fatalf("after bad answers and a restart the input must stay open: inputs %+v choices %+v, %v", info.Inputs, info.Choices, err)
			}
			if choices, _ := e.rt.PendingChoices(ctx, th); len(choices) != 0 {
				t.Errorf("the input is listed as a choice: %+v", choices)
			}
		}
		if status, body := answer(input.CallID, tc.body); status != http.StatusOK {
			t.Fatalf("answer %s: %d %s", tc.body, status, body)
		}
		if status, _ := answer(input.CallID, tc.body); status != http.StatusNotFound {
			t.Fatalf("a second answer got %d, want 404 (answered once)", status)
		}
		e.waitHistory(th, tc.want, func(h []store.Message) bool { return hasText(h, store.RoleAssistant, tc.want) })
		e.idle(th)
		if inputs, err := e.rt.PendingInputs(ctx, th); err != nil || len(inputs) != 0 {
			t.Fatalf("after the answer: inputs %+v, %v", inputs, err)
		}
	}
}

// Every invocation lists the user_input extension.
func TestInvocationListsExtensions(t *testing.T) {
	_, _, _, inv, _ := interactionEnv(t, nil)
	if !inv.HasExtension(rap.ExtensionUserInput) {
		t.Fatalf("invocation extensions = %q, want %q", inv.Extensions, rap.ExtensionUserInput)
	}
}

// A user_input the runtime cannot show (an invalid form, a response_url
// on another host) is refused with a 400 that says why, and the call ends
// with an error result instead of waiting for ever.
func TestUserInputRefusedEndsCall(t *testing.T) {
	t.Run("invalid form", func(t *testing.T) {
		e, ts, th, inv, cancels := interactionEnv(t, nil)
		body := map[string]any{"type": "user_input", "group_id": th, "id": inv.ID, "prompt": "?", "response_url": ts.URL() + "/answer",
			"fields": []map[string]any{{"name": "n", "type": "colour"}}}
		status, got := callback(t, inv.CallbackURL, body)
		if status != http.StatusBadRequest || !strings.Contains(got, "fields[0].type") {
			t.Fatalf("%d %s, want 400 naming fields[0].type", status, got)
		}
		if ins, _ := e.rt.PendingInputs(context.Background(), th); len(ins) != 0 {
			t.Fatalf("the refused input is shown: %+v", ins)
		}
		wantEnded(t, e, th, inv, cancels, "cannot show")
	})
	t.Run("another host", func(t *testing.T) {
		e, _, th, inv, cancels := interactionEnv(t, nil)
		msg := rap.UserInput{GroupID: th, ID: inv.ID, Prompt: "?", Fields: []rap.InputField{{Name: "n", Type: rap.InputString}},
			ResponseURL: "http://elsewhere.example/answer"}
		if status, got := callback(t, inv.CallbackURL, msg); status != http.StatusBadRequest || !strings.Contains(got, "response_url") {
			t.Fatalf("%d %s, want 400 naming response_url", status, got)
		}
		wantEnded(t, e, th, inv, cancels, "address the runtime does not allow")
	})
	t.Run("answered through the runtime", func(t *testing.T) {
		e, ts, th, inv, _ := interactionEnv(t, nil)
		answered := make(chan string, 2)
		ts.onOther = func(r *http.Request, body []byte) {
			if r.URL.Path == "/answer" {
				answered <- string(body)
			}
		}
		msg := rap.UserInput{GroupID: th, ID: inv.ID, Prompt: "?", Fields: []rap.InputField{{Name: "n", Type: rap.InputBoolean}},
			ResponseURL: ts.URL() + "/answer?key=k"}
		if status, got := callback(t, inv.CallbackURL, msg); status != http.StatusOK {
			t.Fatalf("%d %s", status, got)
		}
		if err := e.rt.AnswerInput(context.Background(), th, inv.ID, map[string]json.RawMessage{"n": json.RawMessage(`true`)}, false); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-answered:
			if b != `{"id":"`+inv.ID+`","values":{"n":true}}` {
				t.Fatalf("answer = %s", b)
			}
		case <-time.After(waitFor):
			t.Fatal("the answer was not POSTed to the tool")
		}
		if err := e.rt.AnswerInput(context.Background(), th, inv.ID, nil, true); !errors.Is(err, ErrNoInput) {
			t.Fatalf("second answer = %v, want ErrNoInput", err)
		}
	})
}
