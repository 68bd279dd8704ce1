package conformance

import (
	"encoding/json"
	"fmt"
)

// runtimeSteps are the steps the runtime checks ask the agent to make, and
// the tool each calls.
var runtimeSteps = []struct{ step, tool string }{
	{"fields", EchoTool}, {"retry", EchoTool}, {"refused", EchoTool}, {"auth", EchoTool},
	{"choice", EchoTool}, {"oauth", EchoTool}, {"view", EchoTool}, {"subscribe", EchoTool},
	{"cancel", WaitTool}, {"timeout", WaitTool}, {"migrate", EchoTool},
}

// RuntimeScript returns the script of gorap's scripted model
// (docs/scripted-model.md) that makes each step's message call its tool,
// and makes the "child" step spawn a child thread that calls the echo
// tool. Run gorap's runtime with it to check it without a language model.
func RuntimeScript() []byte {
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	type when struct {
		LastResultContains string `json:"last_result_contains,omitempty"`
	}
	type turn struct {
		AfterUser string `json:"after_user,omitempty"`
		When      *when  `json:"when,omitempty"`
		Text      string `json:"text,omitempty"`
		ToolCalls []call `json:"tool_calls,omitempty"`
		Repeat    bool   `json:"repeat,omitempty"`
	}
	var turns []turn
	for _, s := range runtimeSteps {
		turns = append(turns, turn{AfterUser: "[step:" + s.step + "]", ToolCalls: []call{{s.tool, map[string]any{"step": s.step}}}})
	}
	turns = append(turns,
		turn{AfterUser: "[step:child]", ToolCalls: []call{{"spawn_thread", map[string]any{
			"instructions": "Conformance check: call " + EchoTool + " with step child.", "child_of": "{{thread_stack}}"}}}},
		turn{When: &when{LastResultContains: "You are now inside"}, ToolCalls: []call{{EchoTool, map[string]any{"step": "child"}}}},
		turn{Text: "ok", Repeat: true},
	)
	out, _ := json.MarshalIndent(map[string]any{"turns": turns}, "", "  ")
	return append(out, '\n')
}

// RuntimeConfigFile returns a gorap runtime configuration (rap.json) that
// loads the conformance toolset at kitURL.
func RuntimeConfigFile(kitURL string) []byte {
	return fmt.Appendf(nil, `{"tool_sets": [{"type": "toolset_server", "server_url": %q}]}`+"\n", kitURL)
}
