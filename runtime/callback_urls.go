package runtime

// This file owns the checks of the URLs a tool hands the runtime (oauth
// auth_url, user_choice response_url) and refusing an interaction whose
// URL fails them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// URLs a tool hands the runtime in oauth and user_choice messages: the
// runtime shows an auth_url to people and POSTs to a response_url, so neither
// may point anywhere a tool likes.

// checkResponseURL returns what is wrong with a user_choice response_url,
// or "": it must be an http(s) URL on the host and port of the endpoint the
// call was dispatched to, or on a host of Config.ChoiceResponseHosts.
func (r *Runtime) checkResponseURL(call store.Call, raw string) string {
	if p := rap.CheckAuthURL(raw); p != "" {
		return p
	}
	u, _ := url.Parse(raw)
	host, port := rap.HostPort(u)
	if ep, err := url.Parse(call.Endpoint); err == nil && call.Endpoint != "" {
		if eh, ePort := rap.HostPort(ep); eh == host && ePort == port {
			return ""
		}
	}
	for _, allowed := range r.cfg.ChoiceResponseHosts {
		ah, ap, err := net.SplitHostPort(allowed)
		if err != nil {
			ah, ap = allowed, "" // a bare host: every port
		}
		if strings.EqualFold(strings.Trim(ah, "[]"), host) && (ap == "" || ap == port) {
			return ""
		}
	}
	return fmt.Sprintf("must be on the tool's own host (%s), or on a host listed in the runtime's ChoiceResponseHosts; %s is not", redact(call.Endpoint), u.Host)
}

// refuseInteraction answers 400 to an oauth or user_choice message the
// runtime will not show. Its call cannot complete as the tool meant (the
// user never sees the link or the question), so a pending call ends here
// with modelText as its Error result, the tool gets /cancel_tool_call,
// and the tool's later result is ignored as a duplicate. The refusal is
// committed (out.commit).
func (r *Runtime) refuseInteraction(tx store.Tx, call store.Call, problem, modelText string) (callbackOutcome, error) {
	out := callbackOutcome{status: http.StatusBadRequest, msg: "invalid callback message: " + problem}
	r.log.Warn("interaction refused", "thread", call.ThreadID, "call_id", call.CallID, "tool", call.ToolName, "problem", problem)
	if !call.State.Pending() {
		return out, nil
	}
	changed, err := tx.SetCallState(call.ThreadID, call.CallID, store.CallDone, store.CallNew, store.CallDispatched)
	if err != nil || !changed {
		return out, err
	}
	if _, err := tx.TakeChoice(call.ThreadID, call.CallID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return callbackOutcome{}, err
	}
	if err := r.coord.forgetAuthTx(tx, call.ThreadID, call.CallID); err != nil {
		return callbackOutcome{}, err
	}
	payload, _ := json.Marshal(store.ToolResult{CallID: call.CallID, Name: call.ToolName, Text: modelText, IsError: true})
	added, err := tx.Enqueue(store.InboxItem{ThreadID: call.ThreadID, Kind: store.KindToolResult, Payload: payload,
		DedupKey: resultDedupKey(call.ThreadID, call.CallID), Once: true})
	if err != nil {
		return callbackOutcome{}, err
	}
	if _, err := r.discardHeldEvents(tx, call, "the call ended: "+problem); err != nil {
		return callbackOutcome{}, err
	}
	out.msg += "; the call is ended with an error result, do not send its tool_result"
	out.commit, out.wake = true, added
	out.fx = &effects{notices: []notice{{path: rap.CancelToolCallPath, body: rap.CancelToolCallRequest{ThreadID: call.ThreadID, ToolCallID: call.CallID}}}}
	out.after = func() { r.coord.forgetAuth(call.ThreadID, call.CallID) }
	return out, nil
}
