package runtime

// This file owns turning the model's response into a turn: the assistant
// message, error results for calls that must not be dispatched (RAP IN-2),
// the calls to dispatch with their deadlines, and the built-in calls to run.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// planTurn turns the model's response into an assistant message, error
// results for calls that must not be dispatched (unknown tool, invalid
// arguments: RAP IN-2) and the calls to dispatch.
//
// used reports whether the thread already has a call with an id; it is
// asked only about ids the model gave.
func (r *Runtime) planTurn(th store.Thread, sess *session, resp *model.Response, used func(id string) bool) (store.Message, []store.ToolResult, []store.Call, []store.ToolCall) {
	threadID := th.ID
	kept := map[string]bool{} // ids of this turn
	turn := store.Message{Role: store.RoleAssistant, Text: resp.Text}
	var rejected []store.ToolResult
	var accepted []store.Call
	var builtins []store.ToolCall
	for _, mc := range resp.ToolCalls {
		id := mc.ID
		// IN-2: use the model's call id, or make a unique one when it is
		// missing or already used in this thread.
		if id == "" || kept[id] || used(id) {
			id = "call_" + strings.ReplaceAll(uuid.NewString(), "-", "") // unique by construction
		}
		kept[id] = true
		args := mc.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if isBuiltin(mc.Name) {
			tc := store.ToolCall{ID: id, Name: mc.Name, Arguments: args, Display: r.display(mc.Name, "", args)}
			turn.ToolCalls = append(turn.ToolCalls, tc)
			builtins = append(builtins, tc)
			continue
		}
		var tool *rap.ResolvedTool
		if mc.Name != InjectedToolName {
			tool, _ = sess.catalog.Lookup(mc.Name)
		}
		script := ""
		if tool != nil {
			script = tool.Tool.DisplayScript
		}
		turn.ToolCalls = append(turn.ToolCalls, store.ToolCall{ID: id, Name: mc.Name, Arguments: args, Display: r.display(mc.Name, script, args)})
		switch {
		case mc.Name == InjectedToolName:
			// RAP SU-5: the reserved name is the runtime's alone.
			rejected = append(rejected, store.ToolResult{CallID: id, Name: mc.Name, IsError: true,
				Text: fmt.Sprintf("Error: %s is reserved for events the runtime adds to the conversation; it cannot be called. Use one of the available tools.", InjectedToolName)})
		case tool == nil:
			rejected = append(rejected, store.ToolResult{CallID: id, Name: mc.Name, IsError: true,
				Text: fmt.Sprintf("Error: there is no tool named %q. Use one of the available tools: %s.", mc.Name, toolNames(sess))})
		default:
			if err := tool.ValidateArguments(args); err != nil {
				rejected = append(rejected, store.ToolResult{CallID: id, Name: mc.Name, IsError: true,
					Text: fmt.Sprintf("Error: the arguments of %s do not match its input schema: %v. Fix the arguments and call it again.", mc.Name, err)})
				continue
			}
			if msg := r.overBudget(th.RootID, sess, tool); msg != "" {
				rejected = append(rejected, store.ToolResult{CallID: id, Name: mc.Name, IsError: true, Text: msg})
				continue
			}
			c := store.Call{ThreadID: threadID, CallID: id, ToolName: mc.Name, Arguments: args,
				Toolset: tool.Toolset, Endpoint: tool.Endpoint, State: store.CallNew}
			if d := r.timeoutFor(mc.Name); d > 0 {
				c.Deadline = time.Now().Add(d).UTC()
			}
			accepted = append(accepted, c)
		}
	}
	return turn, rejected, accepted, builtins
}

func toolNames(s *session) string {
	var names []string
	for _, t := range s.catalog.Tools() {
		if !isBuiltin(t.Tool.Name) {
			names = append(names, t.Tool.Name)
		}
	}
	for _, b := range builtinSpecs {
		names = append(names, b.Name)
	}
	return strings.Join(names, ", ")
}

func (r *Runtime) timeoutFor(tool string) time.Duration {
	if d, ok := r.cfg.ToolTimeouts[tool]; ok {
		return d
	}
	return r.cfg.DefaultToolTimeout
}

// display renders a call for people, falling back to name(args).
// A panicking hook is a failed display, never a failed slice (RAP DS-2).
func (r *Runtime) display(name, script string, args json.RawMessage) (text string) {
	fallback := name + "(" + string(args) + ")"
	if r.cfg.DisplayText == nil {
		return fallback
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Warn("display text hook panicked; using the default", "tool", name, "panic", fmt.Sprint(p))
			text = fallback
		}
	}()
	if s := r.cfg.DisplayText(name, script, args); s != "" {
		return s
	}
	return fallback
}
