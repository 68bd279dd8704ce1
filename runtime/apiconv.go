package runtime

// This file owns the conversions of stored records (runtime/store) into
// the client API's types (runtime/api), one small function per record.
// The /v1 JSON and the Go API return the api types, so a stored record may
// change without changing what clients read. A field the API shows must be
// copied here: apiconv_test.go fails for an api field a conversion leaves
// unset, and for a record field the API neither shows nor lists as hidden.

import (
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// apiThread returns t as the API shows it.
func apiThread(t store.Thread) api.Thread {
	return api.Thread{
		ID:           t.ID,
		ParentID:     t.ParentID,
		RootID:       t.RootID,
		Status:       api.ThreadStatus(t.Status),
		Created:      t.Created,
		OriginCallID: t.OriginCallID,
		OriginTool:   t.OriginTool,
		OriginArgs:   t.OriginArgs,
		InheritSeq:   t.InheritSeq,
		UserID:       t.UserID,
		Title:        sessionTitle(t),
		Archived:     t.Archived,
	}
}

// apiMessage returns m, with its tool calls and results, as the API shows
// it.
func apiMessage(m store.Message) api.Message {
	return api.Message{
		ThreadID:    m.ThreadID,
		Seq:         m.Seq,
		Role:        api.Role(m.Role),
		Text:        m.Text,
		ToolCalls:   apiSlice(m.ToolCalls, apiToolCall),
		ToolResults: apiSlice(m.ToolResults, apiToolResult),
		Created:     m.Created,
	}
}

// apiToolCall returns c as the API shows it.
func apiToolCall(c store.ToolCall) api.ToolCall {
	return api.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Display: c.Display}
}

// apiToolResult returns res as the API shows it.
func apiToolResult(res store.ToolResult) api.ToolResult {
	return api.ToolResult{
		CallID:       res.CallID,
		Name:         res.Name,
		Text:         res.Text,
		Content:      res.Content,
		DisplayAs:    res.DisplayAs,
		IsError:      res.IsError,
		Subscription: res.Subscription,
	}
}

// apiCall returns c as the API shows it.
func apiCall(c store.Call) api.Call {
	return api.Call{
		ThreadID:  c.ThreadID,
		CallID:    c.CallID,
		ToolName:  c.ToolName,
		Arguments: c.Arguments,
		Toolset:   c.Toolset,
		Endpoint:  c.Endpoint,
		TurnSeq:   c.TurnSeq,
		State:     api.CallState(c.State),
		Deadline:  c.Deadline,
		Created:   c.Created,
		Updated:   c.Updated,
	}
}

// apiSubscription returns s as the API shows it.
func apiSubscription(s store.Subscription) api.Subscription {
	return api.Subscription{ThreadID: s.ThreadID, CallID: s.CallID, ToolName: s.ToolName,
		State: api.SubscriptionState(s.State), Created: s.Created}
}

// apiChoice returns c as the API shows it: without its response URL,
// which may hold a key.
func apiChoice(c store.Choice) api.Choice {
	return api.Choice{ThreadID: c.ThreadID, CallID: c.CallID, ToolName: c.ToolName, Prompt: c.Prompt,
		Choices: c.Choices, Default: c.Default, Created: c.Created}
}

// apiSlice converts every record of in with conv. A nil in gives nil and
// an empty one an empty slice, so that the JSON (null or []) stays what it
// was.
func apiSlice[S, A any](in []S, conv func(S) A) []A {
	if in == nil {
		return nil
	}
	out := make([]A, len(in))
	for i, v := range in {
		out[i] = conv(v)
	}
	return out
}
