package runtime

import (
	"fmt"
	"strings"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// pendingResultText is what the model sees for a call whose result had not
// arrived when the conversation moved on.
const pendingResultText = "The tool is still running; its result has not arrived yet. It will be added to the conversation when it arrives."

// buildRequest turns a stored history into a model request whose every
// tool call is directly followed by a result (see the package comment).
// placeholder gives the text of a call whose result has not arrived. The
// tools are the session's toolset tools and the built-in tools (a toolset
// tool named like a built-in is hidden); the reserved injected tool name
// is never offered (RAP SU-5).
func (r *Runtime) buildRequest(sess *session, history []store.Message, placeholder func(callID string) string) model.Request {
	req := model.Request{System: r.cfg.System, MaxTokens: r.cfg.MaxTokens}
	for _, t := range sess.catalog.Tools() {
		if isBuiltin(t.Tool.Name) || t.Tool.Name == InjectedToolName {
			continue
		}
		req.Tools = append(req.Tools, model.ToolSpec{Name: t.Tool.Name, Description: t.Tool.Description, InputSchema: t.Tool.InputSchema})
	}
	req.Tools = append(req.Tools, builtinSpecs...)
	req.Messages = arrangeHistoryWith(history, r.model.SupportsImages(), placeholder)
	return req
}

// arrangeHistory implements the ordering rule: results that arrived before
// the next user or assistant message go right after their call; a missing
// result gets a placeholder, and a result arriving later is shown as a user
// note where it arrived.
func arrangeHistory(history []store.Message, images bool) []model.Message {
	return arrangeHistoryWith(history, images, nil)
}

// arrangeHistoryWith is arrangeHistory with the placeholder text of each
// call whose result is missing given by placeholder (nil: the default).
func arrangeHistoryWith(history []store.Message, images bool, placeholder func(callID string) string) []model.Message {
	if placeholder == nil {
		placeholder = func(string) string { return pendingResultText }
	}
	var out []model.Message
	// owner maps a call id to the index of the assistant message that made
	// it; inTime marks the calls whose result is placed right after it.
	owner := map[string]int{}
	inTime := map[string]bool{}
	for i, m := range history {
		if m.Role != store.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		for _, c := range m.ToolCalls {
			owner[c.ID] = i
		}
		for j := i + 1; j < len(history) && history[j].Role == store.RoleTool; j++ {
			for _, res := range history[j].ToolResults {
				if k, ok := owner[res.CallID]; ok && k == i {
					inTime[res.CallID] = true
				}
			}
		}
	}
	callNames := map[string]string{}
	addUserText := func(text string) {
		// Consecutive user content is merged into one message, so roles
		// alternate as every provider expects.
		if n := len(out); n > 0 && out[n-1].Role == model.RoleUser {
			if out[n-1].Text != "" {
				text = out[n-1].Text + "\n\n" + text
			}
			out[n-1].Text = text
			return
		}
		out = append(out, model.Message{Role: model.RoleUser, Text: text})
	}
	for i := 0; i < len(history); i++ {
		m := history[i]
		switch m.Role {
		case store.RoleUser:
			addUserText(m.Text)
		case store.RoleAssistant:
			if m.Text == "" && len(m.ToolCalls) == 0 {
				continue // an empty reply: providers refuse empty messages
			}
			am := model.Message{Role: model.RoleAssistant, Text: m.Text}
			for _, c := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
				callNames[c.ID] = c.Name
			}
			if n := len(out); n > 0 && out[n-1].Role == model.RoleAssistant && len(out[n-1].ToolCalls) == 0 {
				// An injected event call right after a text-only reply: one
				// assistant message, so roles keep alternating.
				am.Text = strings.TrimSpace(out[n-1].Text + "\n\n" + am.Text)
				out[n-1] = am
			} else {
				out = append(out, am)
			}
			if len(m.ToolCalls) == 0 {
				continue
			}
			// Gather the results that arrived in time, in call order.
			got := map[string]store.ToolResult{}
			for j := i + 1; j < len(history) && history[j].Role == store.RoleTool; j++ {
				for _, res := range history[j].ToolResults {
					if _, dup := got[res.CallID]; !dup {
						got[res.CallID] = res
					}
				}
			}
			um := model.Message{Role: model.RoleUser}
			for _, c := range m.ToolCalls {
				res, ok := got[c.ID]
				if !ok {
					um.ToolResults = append(um.ToolResults, model.ToolResult{CallID: c.ID, Text: placeholder(c.ID)})
					continue
				}
				um.ToolResults = append(um.ToolResults, modelResult(res, images))
			}
			out = append(out, um)
		case store.RoleTool:
			// Results placed after their call are skipped here; late ones
			// become a note where they arrived.
			for _, res := range m.ToolResults {
				if inTime[res.CallID] {
					continue
				}
				name := callNames[res.CallID]
				if name == "" {
					name = res.Name
				}
				addUserText(fmt.Sprintf("Result of the earlier call %s (%s), which arrived after the conversation moved on:\n%s",
					res.CallID, name, modelText(res, images)))
			}
		}
	}
	return out
}

// modelResult converts a stored result for the model. Without image
// support each image becomes a text placeholder (RAP RE-2).
func modelResult(res store.ToolResult, images bool) model.ToolResult {
	out := model.ToolResult{CallID: res.CallID, IsError: res.IsError}
	if len(res.Content) == 0 {
		out.Text = res.Text
		return out
	}
	if !images {
		out.Text = modelText(res, false)
		return out
	}
	for _, c := range res.Content {
		switch c.Type {
		case "image":
			out.Content = append(out.Content, model.ContentPart{Type: "image", Data: c.Data, MediaType: c.MediaType})
		default:
			out.Content = append(out.Content, model.ContentPart{Type: "text", Text: c.Text})
		}
	}
	return out
}

// modelText is the text form of a result: its text items with a
// placeholder per image when images are not accepted (RAP RE-2).
func modelText(res store.ToolResult, images bool) string {
	if len(res.Content) == 0 {
		return res.Text
	}
	r := rap.ToolResult{Content: res.Content}
	if !images {
		return r.ModelText()
	}
	var parts []string
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		} else {
			parts = append(parts, fmt.Sprintf("[image %s]", c.MediaType))
		}
	}
	return strings.Join(parts, "\n")
}
