package runtime

// This file owns building a model request for a slice: the tools offered
// (the session's and the built-ins), the system prompt with the thread
// line, and the messages — the history arranged for the model (arrange.go)
// with the placeholder each missing result gets.

import (
	"github.com/gorap/gorap/model"
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
//
// The conversation is history followed by more (inputs not yet saved),
// read in place: the history is not copied.
//
// The model form of the thread's history up to its last closed turn is
// kept with the history cache, so a completion arranges only the messages
// added since (see arrangeFrom). A tool result over the share of the
// context window it may take is cut, and the images past the newest
// Config.MaxImagesPerRequest are left out (bounds.go); the same history
// always gives the same request.
func (r *Runtime) buildRequest(threadID string, sess *session, history, more []store.Message, placeholder func(callID string) string) model.Request {
	req := model.Request{System: r.cfg.System, MaxTokens: r.cfg.MaxTokens}
	for _, t := range sess.catalog.Tools() {
		if isBuiltin(t.Tool.Name) || t.Tool.Name == InjectedToolName {
			continue
		}
		req.Tools = append(req.Tools, model.ToolSpec{Name: t.Tool.Name, Description: t.Tool.Description, InputSchema: t.Tool.InputSchema})
	}
	req.Tools = append(req.Tools, builtinSpecs...)
	var next *arranged
	view := modelView{images: r.model.SupportsImages(), maxResultTokens: r.maxResultTokens}
	req.Messages, next = arrangeFrom(joined{history, more}, view, placeholder, r.hist.arranged(threadID))
	r.hist.setArranged(threadID, next)
	// The images past the newest few are left out here, after the
	// arranged prefix is kept: which they are changes as images arrive.
	dropped := limitImages(req.Messages, r.maxImages)
	if n := next.settled(); n > 0 {
		// The provider encodes these messages once. With the same number
		// of images left out, the settled messages read the same as when
		// they were encoded; with another, the wire cache starts anew.
		if w := r.hist.wire(threadID, dropped); w != nil {
			req.Settled, req.SettledSeq, req.Wire = n, history[next.upto-1].Seq, w
		}
	}
	return req
}

// ThreadLinePrefix starts the line the runtime appends to the system
// prompt to tell the model which thread it is in, for spawn_thread's
// child_of and close_thread's thread_id (RAP BT-2).
const ThreadLinePrefix = "[runtime] You are thread "

// withThreadLine appends the thread line to a system prompt.
func withThreadLine(system string, stack []string) string {
	if len(stack) == 0 {
		return system
	}
	line := ThreadLinePrefix + stack[len(stack)-1] + ". Your thread stack, root first: " + jsonString(stack) + "."
	if system == "" {
		return line
	}
	return system + "\n\n" + line
}

// authPendingText is the placeholder of a call waiting for the user to
// authorize its tool (RAP OA-1).
const authPendingText = "Authorization is in progress: the user was shown a link to authorize this tool. Its result will be added to the conversation once they have; do not call it again meanwhile."

// placeholderFor returns the placeholder text of each call whose result
// is missing: an authorization in progress, a call an ancestor thread made
// before this thread was started from it (its result never comes
// here), or the default.
func placeholderFor(authPending map[string]bool, inherited map[string]string) func(callID string) string {
	return func(callID string) string {
		if authPending[callID] {
			return authPendingText
		}
		if owner, ok := inherited[callID]; ok {
			return inheritedCallText(owner)
		}
		return pendingResultText
	}
}
