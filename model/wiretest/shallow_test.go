package wiretest_test

import (
	"slices"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

// calls lists each message's role and tool calls (id and name).
func calls(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role))
		for _, c := range m.ToolCalls {
			out = append(out, c.ID+":"+c.Name)
		}
	}
	return out
}

// A Shallow server hands its script the model, limits, streaming and each
// message's role and tool calls as the full decoding does, for both wire
// formats, and still answers 400 to a body that is not JSON.
func TestShallowAgreesWithFullDecoding(t *testing.T) {
	cases := []struct {
		name string
		new  func(wiretest.Script) *wiretest.Server
		path string
		body string
	}{
		{"anthropic", wiretest.NewAnthropic, "/v1/messages", `{"max_tokens":50,"stream":true,"model":"m",
			"system":[{"type":"text","text":"sys"}],"tools":[{"name":"job","input_schema":{"type":"object"}}],
			"messages":[{"role":"user","content":"start"},
			{"role":"assistant","content":[{"type":"text","text":"on it"},{"type":"tool_use","id":"t1","name":"job","input":{"a":[1,{"b":"c"}]}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r1 \"quoted\""}]}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"job","input":{}},{"type":"tool_use","id":"t3","name":"job","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"r2"},{"type":"tool_result","tool_use_id":"t3","content":"r3","is_error":true}]}]}`},
		{"openai", wiretest.NewOpenAI, "/v1/chat/completions", `{"model":"m","max_completion_tokens":50,"stream":true,
			"tools":[{"type":"function","function":{"name":"job","parameters":{"type":"object"}}}],
			"messages":[{"role":"system","content":"sys"},{"role":"user","content":"start"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"job","arguments":"{}"}},{"id":"t2","type":"function","function":{"name":"job","arguments":"{\"a\":1}"}}]},
			{"role":"tool","tool_call_id":"t1","content":"r1"},{"role":"tool","tool_call_id":"t2","content":"r2"}]}`},
		// Repeated keys (the last one counts) and calls on a message that
		// is not the assistant's (dropped), as encoding/json and decode do.
		{"anthropic-repeated-keys", wiretest.NewAnthropic, "/v1/messages", `{"model":"m","max_tokens":50,"stream":true,
			"messages":[{"role":"user","content":"s"},
			{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"old","input":{}}],"content":[{"type":"tool_use","id":"t1","name":"job","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]},{"role":"assistant","content":"done"}]}`},
		{"openai-repeated-keys", wiretest.NewOpenAI, "/v1/chat/completions", `{"model":"m","max_tokens":50,"stream":true,
			"messages":[{"role":"user","content":"dropped"}],
			"messages":[{"role":"user","content":"start","tool_calls":[{"id":"u1","type":"function","function":{"name":"job","arguments":"{}"}}]},
			{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"old","arguments":"{}"}}],"tool_calls":[{"id":"t1","type":"function","function":{"name":"job","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"t1","content":"r"},{"role":"assistant","content":"done"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]wiretest.Request
			for i, shallow := range []bool{false, true} {
				srv := tc.new(func(req wiretest.Request) wiretest.Reply {
					got[i] = req
					return wiretest.Reply{Text: "ok"}
				})
				defer srv.Close()
				if shallow {
					srv.Shallow()
				}
				if status, body := post(t, srv.URL+tc.path, tc.body, nil); status != 200 {
					t.Fatalf("shallow %v: %d %s", shallow, status, body)
				}
				if status, _ := post(t, srv.URL+tc.path, `{"model":`, nil); status != 400 {
					t.Errorf("shallow %v: a body that is not JSON got %d, want 400", shallow, status)
				}
			}
			full, shallow := got[0], got[1]
			if shallow.Model != full.Model || shallow.MaxTokens != full.MaxTokens || shallow.Stream != full.Stream || full.Model != "m" || full.MaxTokens != 50 {
				t.Errorf("shallow model, limit, stream = %q, %d, %v; full %q, %d, %v", shallow.Model, shallow.MaxTokens, shallow.Stream, full.Model, full.MaxTokens, full.Stream)
			}
			if !slices.Equal(calls(shallow.Messages), calls(full.Messages)) || len(calls(full.Messages)) < 5 {
				t.Errorf("shallow messages %v, full %v", calls(shallow.Messages), calls(full.Messages))
			}
		})
	}
}
