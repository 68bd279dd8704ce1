package rap

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// POST /tool_call_status. A runtime asks about a call
// that has been pending for long, or that it holds across its own
// restart; the server answers from what it knows of the call: its live
// calls (running, or delivering their result), its subscriptions and its
// outbox.

// ResultLookup is an optional part of an Outbox: it reports whether a
// tool result for the call (groupID, id) waits in the outbox for
// delivery. A Server whose Store has it answers /tool_call_status
// "delivering" for such a call, even one answered by a previous process.
// rap/durable implements it. For a Store without it, the server reads up
// to MaxStatusScan pending messages instead.
type ResultLookup interface {
	PendingResult(ctx context.Context, groupID, id string) (bool, error)
}

// MaxStatusScan is how many pending outbox messages a Server reads to
// answer /tool_call_status when its Store has no ResultLookup. With more
// pending than that, a call found nowhere is answered 503 ("cannot tell
// now"), never 404, so that the runtime keeps waiting.
const MaxStatusScan = 1000

// serveToolCallStatus answers POST /tool_call_status: 200 with a
// ToolCallStatus for a call the server knows, 404 with status "unknown"
// for one it does not, 400 for a malformed body or unusable id, and 503
// when it cannot tell now (not started, or the store failed).
func (s *Server) serveToolCallStatus(w http.ResponseWriter, r *http.Request) {
	if !s.started.Load() {
		http.Error(w, "tool server not started: the program must call (*rap.Server).Start before serving", http.StatusServiceUnavailable)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	req, err := DecodeToolCallStatus(body)
	if err != nil {
		http.Error(w, "invalid tool_call_status request: "+err.Error()+`; send {"thread_id": ..., "tool_call_id": ...}`, http.StatusBadRequest)
		return
	}
	if err := validID(req.ThreadID); err != nil {
		http.Error(w, "invalid tool_call_status request: thread_id "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := validID(req.ToolCallID); err != nil {
		http.Error(w, "invalid tool_call_status request: tool_call_id "+err.Error(), http.StatusBadRequest)
		return
	}
	state, err := s.callState(r.Context(), req.ThreadID, req.ToolCallID)
	if err != nil {
		s.log.Error("rap: could not look a call up for tool_call_status; answered 503", "toolset", s.name,
			"thread_id", req.ThreadID, "tool_call_id", req.ToolCallID, "error", err)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "tool server cannot tell the call's state now; ask again later", http.StatusServiceUnavailable)
		return
	}
	s.log.Debug("rap: tool_call_status", "toolset", s.name, "thread_id", req.ThreadID, "tool_call_id", req.ToolCallID, "status", state)
	out, _ := json.Marshal(ToolCallStatus{ToolCallID: req.ToolCallID, Status: state})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if state == CallUnknown {
		w.WriteHeader(http.StatusNotFound)
	}
	_, _ = w.Write(out)
}

// callState is what the server knows of the call (group, id). The
// sources are read in the order a call moves through them (live, then
// outbox), so a call that moves on meanwhile is still found.
func (s *Server) callState(ctx context.Context, group, id string) (CallState, error) {
	s.mu.Lock()
	a, live := s.active[group][id]
	s.mu.Unlock()
	if s.subIndex.has(group, id) {
		return CallSubscribed, nil
	}
	if live {
		if a.call != nil && a.call.sent.Load() {
			return CallDelivering, nil // without a Store the worker delivers it
		}
		return CallRunning, nil
	}
	if s.sender.outbox == nil {
		return CallUnknown, nil
	}
	// The outbox: the Store's, or the in-memory one of a server without a
	// Store, where a result waits once its handler has returned.
	found, err := s.resultPending(ctx, group, id)
	switch {
	case err != nil:
		return "", err
	case found:
		return CallDelivering, nil
	}
	return CallUnknown, nil
}

// resultPending reports whether the outbox holds a tool result for
// (group, id).
func (s *Server) resultPending(ctx context.Context, group, id string) (bool, error) {
	outbox := s.sender.outbox
	if l, ok := outbox.(ResultLookup); ok {
		return l.PendingResult(ctx, group, id)
	}
	msgs, err := outbox.Pending(ctx, MaxStatusScan)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if isResultFor(m.Body, group, id) {
			return true, nil
		}
	}
	if len(msgs) >= MaxStatusScan {
		return false, fmt.Errorf("over %d messages are pending and the Store cannot look a result up (rap.ResultLookup)", MaxStatusScan)
	}
	return false, nil
}

// subscriptionIndex wraps the server's SubscriptionStore and remembers
// which subscriptions are stored, so that /tool_call_status answers
// without reading the store.
type subscriptionIndex struct {
	SubscriptionStore
	mu  sync.Mutex
	ids map[[2]string]struct{}
}

func newSubscriptionIndex(st SubscriptionStore) *subscriptionIndex {
	return &subscriptionIndex{SubscriptionStore: st, ids: map[[2]string]struct{}{}}
}

// SaveSubscription implements SubscriptionStore.
func (x *subscriptionIndex) SaveSubscription(ctx context.Context, r SubscriptionRecord) error {
	if err := x.SubscriptionStore.SaveSubscription(ctx, r); err != nil {
		return err
	}
	x.mu.Lock()
	x.ids[[2]string{r.Invocation.GroupID, r.Invocation.ID}] = struct{}{}
	x.mu.Unlock()
	return nil
}

// DeleteSubscription implements SubscriptionStore. The subscription stops
// counting even if the store fails to forget it: it no longer runs.
func (x *subscriptionIndex) DeleteSubscription(ctx context.Context, groupID, id string) error {
	x.mu.Lock()
	delete(x.ids, [2]string{groupID, id})
	x.mu.Unlock()
	return x.SubscriptionStore.DeleteSubscription(ctx, groupID, id)
}

// ListSubscriptions implements SubscriptionStore, remembering what it
// lists (Start lists the subscriptions it resumes).
func (x *subscriptionIndex) ListSubscriptions(ctx context.Context) ([]SubscriptionRecord, error) {
	recs, err := x.SubscriptionStore.ListSubscriptions(ctx)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	for _, r := range recs {
		x.ids[[2]string{r.Invocation.GroupID, r.Invocation.ID}] = struct{}{}
	}
	x.mu.Unlock()
	return recs, nil
}

func (x *subscriptionIndex) has(group, id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.ids[[2]string{group, id}]
	return ok
}
