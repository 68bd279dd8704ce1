package mcpserve

// This file owns RAP subscriptions called from MCP (RAP SU-1..SU-4): the
// call returns the confirming result with a link to a resource of its
// own; the subscription's events are kept in that resource, and each one
// sends an MCP resource update notification to the session, when it
// subscribed to the resource.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the events a subscription's resource keeps: the newest ones,
// at most maxKeptEvents and maxKeptBytes of text (but always the newest).
const (
	maxKeptEvents = 100
	maxKeptBytes  = 1 << 20
)

// subscriptionScheme is the URI scheme of the subscriptions' resources.
const subscriptionScheme = "rap-subscription"

// subscriptions are the RAP subscriptions of all sessions.
type subscriptions struct {
	s     *Server
	mu    sync.Mutex
	byURI map[string]*subscription
}

// subscription is one confirmed RAP subscription and its resource.
type subscription struct {
	uri, tool string
	owner     *mcp.ServerSession
	call      *raptest.Call
	stop      context.CancelFunc

	mu      sync.Mutex
	events  []event
	bytes   int
	seq     int
	dropped int
	ended   bool // a final event came
}

// event is one subscription event as the resource shows it.
type event struct {
	Seq   int    `json:"seq"`
	Text  string `json:"text"`
	Final bool   `json:"final,omitempty"`
}

func newSubscriptions(s *Server) *subscriptions {
	return &subscriptions{s: s, byURI: map[string]*subscription{}}
}

// register adds what the MCP server needs for subscriptions: listing a
// session's own subscription resources only.
func (ss *subscriptions) register(srv *mcp.Server) {
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListResourcesResult); ok && err == nil && method == "resources/list" {
				kept := lr.Resources[:0:0]
				for _, r := range lr.Resources {
					if ss.owned(r.URI, req.GetSession()) != nil {
						kept = append(kept, r)
					}
				}
				lr.Resources = kept
			}
			return res, err
		}
	})
}

// owned returns the subscription of uri when session owns it.
func (ss *subscriptions) owned(uri string, session mcp.Session) *subscription {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sub := ss.byURI[uri]
	if sub == nil || mcp.Session(sub.owner) != session {
		return nil
	}
	return sub
}

// confirmed takes over a call whose result confirmed a subscription
// (RAP SU-1): it adds the subscription's resource, follows its events in
// the background, and returns the MCP result: the confirmation, a note
// and a link to the resource.
func (ss *subscriptions) confirmed(c *callState, m *rap.ToolResult) *mcp.CallToolResult {
	s := ss.s
	sub := &subscription{uri: subscriptionScheme + "://" + randomHex(16), tool: c.e.tool.Tool.Name, owner: c.req.Session, call: c.call}
	ctx, stop := context.WithCancel(context.Background())
	sub.stop = stop
	s.mu.Lock()
	closed := s.closed
	if !closed {
		ss.mu.Lock()
		ss.byURI[sub.uri] = sub
		ss.mu.Unlock()
		s.wg.Go(func() { ss.follow(ctx, sub) })
	}
	s.mu.Unlock()
	if closed {
		stop()
		c.cancel("the MCP server is shutting down")
		return errorResult(fmt.Sprintf("Error: the MCP server stopped while %q was subscribing, so the subscription was cancelled.", sub.tool))
	}
	s.mcp.AddResource(&mcp.Resource{
		URI: sub.uri, Name: sub.tool + " events", MIMEType: "application/json",
		Description: fmt.Sprintf("The events of the subscription made by %s: JSON {\"tool\", \"ended\", \"dropped\", \"events\": [{\"seq\", \"text\", \"final\"}]}, the newest %d at most.", sub.tool, maxKeptEvents),
	}, ss.read)
	res := mcpResult(m)
	res.Content = append(res.Content,
		&mcp.TextContent{Text: fmt.Sprintf("[gorap] This call started a subscription. Its events are kept in the resource %s: subscribe to it (resources/subscribe) to be told of each new event, read it (resources/read) to get them. Unsubscribing from the resource, or ending this MCP session, cancels the subscription.", sub.uri)},
		&mcp.ResourceLink{URI: sub.uri, Name: sub.tool + " events", MIMEType: "application/json"},
	)
	s.log.Info("mcpserve: subscription confirmed", "tool", sub.tool)
	return res
}

// follow keeps the subscription's events until its final event or until
// it is stopped.
func (ss *subscriptions) follow(ctx context.Context, sub *subscription) {
	for {
		msg, err := sub.call.Next(ctx)
		if err != nil {
			return // stopped: end does the rest
		}
		sub.call.Release() // a subscription may run for days: keep only what is unread
		ev, ok := msg.(*rap.SubscriptionEvent)
		if !ok {
			continue // view updates are not events
		}
		sub.add(ev)
		_ = ss.s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: sub.uri})
		if ev.Final {
			sub.call.Close() // the tool sends nothing more (RAP SU-4)
			ss.s.log.Info("mcpserve: subscription ended by the tool", "tool", sub.tool)
			return
		}
	}
}

// add keeps an event, dropping the oldest beyond the bounds.
func (sub *subscription) add(ev *rap.SubscriptionEvent) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.seq++
	sub.events = append(sub.events, event{Seq: sub.seq, Text: ev.Text, Final: ev.Final})
	sub.bytes += len(ev.Text)
	for len(sub.events) > 1 && (len(sub.events) > maxKeptEvents || sub.bytes > maxKeptBytes) {
		sub.bytes -= len(sub.events[0].Text)
		sub.events = sub.events[1:]
		sub.dropped++
	}
	if ev.Final {
		sub.ended = true
	}
}

// read answers resources/read of a subscription's resource, for its own
// session only.
func (ss *subscriptions) read(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	sub := ss.owned(uri, req.Session)
	if sub == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	sub.mu.Lock()
	body, err := json.Marshal(struct {
		Tool    string  `json:"tool"`
		Ended   bool    `json:"ended"`
		Dropped int     `json:"dropped"`
		Events  []event `json:"events"`
	}{sub.tool, sub.ended, sub.dropped, append([]event{}, sub.events...)})
	sub.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(body)}}}, nil
}

// subscribe allows resources/subscribe of a session's own subscription
// resources only.
func (ss *subscriptions) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if ss.owned(req.Params.URI, req.Session) == nil {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	return nil
}

// unsubscribe cancels the RAP subscription of the resource.
func (ss *subscriptions) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	sub := ss.owned(req.Params.URI, req.Session)
	if sub == nil {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	ss.end(sub, "the MCP client unsubscribed from its resource", true)
	return nil
}

// sessionEnded cancels the subscriptions of a session that ended.
func (ss *subscriptions) sessionEnded(session *mcp.ServerSession) {
	for _, sub := range ss.list(session) {
		ss.end(sub, "its MCP session ended", true)
	}
}

// closeAll cancels every subscription.
func (ss *subscriptions) closeAll() {
	for _, sub := range ss.list(nil) {
		ss.end(sub, "the MCP server is shutting down", false)
	}
}

// list returns the subscriptions of session (nil: all).
func (ss *subscriptions) list(session *mcp.ServerSession) []*subscription {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []*subscription
	for _, sub := range ss.byURI {
		if session == nil || sub.owner == session {
			out = append(out, sub)
		}
	}
	return out
}

// end stops following a subscription, cancels it at the tool server
// (RAP CA-1) unless its final event came, and removes its resource (when
// removeResource: not while the server closes). A second end does
// nothing.
func (ss *subscriptions) end(sub *subscription, why string, removeResource bool) {
	ss.mu.Lock()
	_, present := ss.byURI[sub.uri]
	delete(ss.byURI, sub.uri)
	ss.mu.Unlock()
	if !present {
		return // ended already
	}
	sub.stop()
	sub.mu.Lock()
	ended := sub.ended
	sub.mu.Unlock()
	if !ended {
		ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
		if err := sub.call.Cancel(ctx); err != nil {
			ss.s.log.Warn("mcpserve: /cancel_tool_call of a subscription failed", "tool", sub.tool, "err", withoutRaptestPrefix(err))
		}
		cancel()
	}
	sub.call.Close()
	if removeResource {
		ss.s.mcp.RemoveResources(sub.uri)
	}
	ss.s.log.Info("mcpserve: subscription cancelled", "tool", sub.tool, "why", why)
}
