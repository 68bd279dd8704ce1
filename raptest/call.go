package raptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/gorap/gorap/rap"
)

// Discover fetches and validates the toolset a tool server publishes at
// baseURL/.well-known/rap-toolset (RAP TS-4, TS-5) and remembers it for
// Invoke. It fetches afresh on every call. An invalid manifest is an error
// listing every violation (a *rap.ValidationError inside).
func (rt *Runtime) Discover(ctx context.Context, baseURL string) (*rap.Toolset, error) {
	ts, _, err := rap.FetchToolset(ctx, rt.client, baseURL)
	if err != nil {
		return nil, fmt.Errorf("raptest: %w", err)
	}
	cat, errs := rap.NewCatalog([]*rap.Toolset{ts})
	if len(errs) > 0 {
		return nil, fmt.Errorf("raptest: toolset at %s: %w", baseURL, errors.Join(errs...))
	}
	rt.mu.Lock()
	rt.toolsets[strings.TrimRight(baseURL, "/")] = &discovered{ts: ts, catalog: cat}
	rt.mu.Unlock()
	return ts, nil
}

// discovered is a validated toolset and its catalog.
type discovered struct {
	ts      *rap.Toolset
	catalog *rap.Catalog
}

// toolset returns the remembered toolset of baseURL, discovering it first
// if need be.
func (rt *Runtime) toolset(ctx context.Context, baseURL string) (*discovered, error) {
	rt.mu.Lock()
	d := rt.toolsets[strings.TrimRight(baseURL, "/")]
	rt.mu.Unlock()
	if d != nil {
		return d, nil
	}
	if _, err := rt.Discover(ctx, baseURL); err != nil {
		return nil, err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.toolsets[strings.TrimRight(baseURL, "/")], nil
}

// InvokeOption sets a field of one invocation.
type InvokeOption func(*invokeConfig)

type invokeConfig struct {
	id         string
	callID     string
	thread     string
	ancestors  []string
	userID     string
	extensions []string
	unchecked  bool
}

// WithID sets the invocation's id instead of a fresh random one.
func WithID(id string) InvokeOption { return func(c *invokeConfig) { c.id = id } }

// WithCallID sets the invocation's call_id, which the tool must echo
// (RAP RE-1).
func WithCallID(id string) InvokeOption { return func(c *invokeConfig) { c.callID = id } }

// InThread sets the invocation's group_id instead of the runtime's default
// thread id.
func InThread(groupID string) InvokeOption { return func(c *invokeConfig) { c.thread = groupID } }

// WithAncestors sets thread_ancestors, the ancestor thread ids from the root
// to the parent (RAP IN-1).
func WithAncestors(ids ...string) InvokeOption {
	return func(c *invokeConfig) { c.ancestors = append([]string(nil), ids...) }
}

// WithExtensions lists gorap extensions in the invocation, such as
// rap.ExtensionUserInput: the tool may then send their messages, which
// Call.Next returns like any other.
func WithExtensions(names ...string) InvokeOption {
	return func(c *invokeConfig) { c.extensions = append([]string(nil), names...) }
}

// WithUserID sets the invocation's user_id.
func WithUserID(id string) InvokeOption { return func(c *invokeConfig) { c.userID = id } }

// Unchecked sends the invocation even if the operation is not in the
// discovered toolset or the arguments fail its input schema, so that a
// test can check how a tool answers an unknown operation or invalid
// arguments (RAP IN-3, TS-10). A real runtime does not (RAP IN-2).
func Unchecked() InvokeOption { return func(c *invokeConfig) { c.unchecked = true } }

// Invoke sends one invocation of operation to the endpoint of the toolset
// served at baseURL, discovering the toolset first if this runtime has not
// yet done so. args is marshalled to JSON and must be a JSON object; nil
// means {} and a json.RawMessage is sent as it is. The invocation carries a
// fresh id, a callback_url unique to this call that embeds an unguessable
// token, and the runtime's thread id as group_id unless opts say otherwise.
//
// Invoke returns once the tool has acknowledged the invocation. Any answer
// but 200 is an error (a *StatusError with the status and body); Invoke
// does not retry, so that a test sees exactly what the tool answered.
func (rt *Runtime) Invoke(ctx context.Context, baseURL, operation string, args any, opts ...InvokeOption) (*Call, error) {
	var ic invokeConfig
	for _, o := range opts {
		o(&ic)
	}
	d, err := rt.toolset(ctx, baseURL)
	if err != nil {
		return nil, err
	}
	rawArgs, err := marshalArgs(args)
	if err != nil {
		return nil, err
	}
	if !ic.unchecked {
		tool, ok := d.catalog.Lookup(operation)
		if !ok {
			return nil, fmt.Errorf("raptest: toolset %q at %s has no tool %q; its tools are %s (use raptest.Unchecked to send it anyway)",
				d.ts.Name, baseURL, operation, toolNames(d.ts))
		}
		if err := tool.ValidateArguments(rawArgs); err != nil {
			return nil, fmt.Errorf("raptest: %s: %w (use raptest.Unchecked to send them anyway)", operation, err)
		}
	}
	endpoint, err := resolveEndpoint(baseURL, d.ts.Endpoint)
	if err != nil {
		return nil, err
	}
	token := randomHex(24)
	inv := rap.Invocation{
		Operation:       operation,
		Arguments:       rawArgs,
		ID:              ic.id,
		CallID:          ic.callID,
		CallbackURL:     rt.url + callbackPrefix + token,
		GroupID:         ic.thread,
		ThreadAncestors: ic.ancestors,
		UserID:          ic.userID,
		Extensions:      ic.extensions,
	}
	if inv.ID == "" {
		inv.ID = "call_" + randomHex(12)
	}
	if inv.GroupID == "" {
		inv.GroupID = rt.threadID
	}
	body, err := json.Marshal(inv)
	if err != nil {
		return nil, fmt.Errorf("raptest: encoding invocation: %w", err)
	}
	call := &Call{Invocation: inv, BaseURL: strings.TrimRight(baseURL, "/"), rt: rt, token: token, changed: make(chan struct{})}
	// Register before sending: a fast tool may call back before its 200
	// reaches us.
	rt.mu.Lock()
	rt.calls[token] = call
	rt.mu.Unlock()
	if err := rt.post(ctx, endpoint, body); err != nil {
		rt.forget(token)
		return nil, err
	}
	return call, nil
}

func (rt *Runtime) forget(token string) {
	rt.mu.Lock()
	delete(rt.calls, token)
	rt.mu.Unlock()
}

func toolNames(ts *rap.Toolset) string {
	names := make([]string, len(ts.Tools))
	for i, t := range ts.Tools {
		names[i] = t.Name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// resolveEndpoint resolves a toolset's endpoint against its base URL, so
// that a relative endpoint works too.
func resolveEndpoint(baseURL, endpoint string) (string, error) {
	b, err := url.Parse(strings.TrimRight(baseURL, "/") + "/")
	if err != nil {
		return "", fmt.Errorf("raptest: base URL %q: %w", baseURL, err)
	}
	e, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("raptest: toolset endpoint %q: %w", endpoint, err)
	}
	return b.ResolveReference(e).String(), nil
}

// marshalArgs encodes invocation arguments and checks that they form a
// JSON object (RAP IN-1).
func marshalArgs(args any) (json.RawMessage, error) {
	var raw []byte
	switch a := args.(type) {
	case nil:
		return json.RawMessage(`{}`), nil
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("raptest: encoding arguments: %w", err)
		}
		raw = b
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("raptest: arguments must be a JSON object, got %.60q", raw)
	}
	return json.RawMessage(raw), nil
}

// Call is one invocation sent by a Runtime and the callbacks that arrived
// for it. Three independent cursors read the callbacks: Next returns every
// message in arrival order, Result returns the tool_result, and Events
// returns subscription events in order. Its methods are safe for
// concurrent use.
type Call struct {
	// Invocation is exactly what was sent to the tool.
	Invocation rap.Invocation
	// BaseURL is the tool server's base URL, used by Cancel.
	BaseURL string

	rt    *Runtime
	token string

	mu        sync.Mutex
	msgs      []rap.Callback
	changed   chan struct{} // closed and replaced when msgs grows
	next      int           // Next's cursor into msgs
	eventsOut int           // events already returned by Events
	results   int           // tool_results received
	confirmed bool          // a tool_result with subscription: true arrived
	final     bool          // a final event arrived
}

// check reports whether msg belongs to this call. A nonzero status means it
// does not, with the reason.
func (c *Call) check(msg rap.Callback) (status int, problem string) {
	inv := &c.Invocation
	if msg.Thread() != inv.GroupID {
		return 403, fmt.Sprintf("group_id is %q, want %q from the invocation (RAP TR-5)", msg.Thread(), inv.GroupID)
	}
	var id, callID string
	var hasCallID bool
	switch m := msg.(type) {
	case *rap.ToolResult:
		id, callID, hasCallID = m.ID, m.CallID, true
	case *rap.OAuth:
		id, callID, hasCallID = m.ID, m.CallID, true
	case *rap.UserChoice:
		id, callID, hasCallID = m.ID, m.CallID, true
	case *rap.UserInput:
		if !inv.HasExtension(rap.ExtensionUserInput) {
			return 400, "user_input is a gorap extension this invocation did not list in extensions; a tool must not send it (use raptest.WithExtensions)"
		}
		id, callID, hasCallID = m.ID, m.CallID, true
	case *rap.SubscriptionEvent:
		if m.ToolCallID != inv.ID {
			return 403, fmt.Sprintf("tool_call_id is %q, want the subscribing invocation's id %q (RAP SU-2)", m.ToolCallID, inv.ID)
		}
		return 0, ""
	default: // view_update carries only group_id
		return 0, ""
	}
	if id != inv.ID {
		return 403, fmt.Sprintf("%s id is %q, want the invocation's id %q (RAP RE-1)", msg.MessageType(), id, inv.ID)
	}
	if hasCallID && inv.CallID != "" && callID != inv.CallID {
		if callID == "" {
			return 400, fmt.Sprintf("%s lacks call_id; the invocation had call_id %q and it must be echoed (RAP RE-1)", msg.MessageType(), inv.CallID)
		}
		return 403, fmt.Sprintf("%s call_id is %q, want %q from the invocation (RAP RE-1)", msg.MessageType(), callID, inv.CallID)
	}
	return 0, ""
}

// add appends an accepted message and wakes the waiters. A message that
// breaks an ordering rule is kept, as a runtime would discard it (RAP SU-4,
// SU-5), but recorded first, since a tool that sends it is wrong.
func (c *Call) add(msg rap.Callback) {
	c.mu.Lock()
	defer c.mu.Unlock()
	problem := ""
	switch m := msg.(type) {
	case *rap.ToolResult:
		c.results++
		if c.results > 1 {
			problem = fmt.Sprintf("tool_result number %d for one call; a call gets exactly one result (RAP SU-5, IN-4)", c.results)
		} else if m.Subscription {
			c.confirmed = true
		}
	case *rap.SubscriptionEvent:
		switch {
		case c.results == 0:
			problem = "subscription_event before the confirming tool_result; a runtime discards events of a subscription it does not know yet, so confirm first (RAP SU-1, SU-3, SU-4)"
		case !c.confirmed:
			problem = "subscription_event for a call whose tool_result did not say subscription: true; a runtime discards it (RAP SU-1, SU-4)"
		case c.final:
			problem = "subscription_event after the final event; a tool sends nothing after final (RAP SU-4)"
		}
		if m.Final {
			c.final = true
		}
	}
	if problem != "" {
		c.rt.recordError(&CallbackError{CallID: c.Invocation.ID, Status: 200, Problem: problem})
	}
	c.msgs = append(c.msgs, msg)
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait blocks until pick finds what it wants in the call's messages, then
// returns pick's answer. pick runs with c.mu held.
func (c *Call) wait(ctx context.Context, what string, pick func() bool) error {
	for {
		c.mu.Lock()
		if pick() {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("raptest: waiting for %s of call %s (%s): %w; received so far: %s",
				what, c.Invocation.ID, c.Invocation.Operation, context.Cause(ctx), c.summary())
		case <-c.rt.done:
			return fmt.Errorf("raptest: waiting for %s of call %s: %w", what, c.Invocation.ID, ErrClosed)
		}
	}
}

// summary lists the types of the messages received, for error messages.
func (c *Call) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.msgs) == 0 {
		return "nothing"
	}
	parts := make([]string, len(c.msgs))
	for i, m := range c.msgs {
		parts[i] = string(m.MessageType())
	}
	return strings.Join(parts, ", ")
}

// Next returns the next callback message of this call in arrival order,
// waiting for one if need be. Each message is returned once.
func (c *Call) Next(ctx context.Context) (rap.Callback, error) {
	var msg rap.Callback
	err := c.wait(ctx, "the next callback", func() bool {
		if c.next < len(c.msgs) {
			msg = c.msgs[c.next]
			c.next++
			return true
		}
		return false
	})
	return msg, err
}

// Result waits for the call's tool_result and returns it. Messages that
// come before it (oauth, user_choice, view_update, events) are passed over
// and stay available through Next and Messages. Result can be called any
// number of times; it always returns the first tool_result.
func (c *Call) Result(ctx context.Context) (*rap.ToolResult, error) {
	var res *rap.ToolResult
	err := c.wait(ctx, "the tool_result", func() bool {
		for _, m := range c.msgs {
			if r, ok := m.(*rap.ToolResult); ok {
				res = r
				return true
			}
		}
		return false
	})
	return res, err
}

// Events waits until n more subscription events have arrived than earlier
// calls of Events returned, and returns those n in order. Other messages
// are passed over. Events stops early, with what it has, after a final
// event, and returns an error if fewer than n events arrived by then;
// events after the final one (a tool bug, see Errors) are never returned.
func (c *Call) Events(ctx context.Context, n int) ([]*rap.SubscriptionEvent, error) {
	var out []*rap.SubscriptionEvent
	err := c.wait(ctx, fmt.Sprintf("%d subscription events", n), func() bool {
		var evs []*rap.SubscriptionEvent
		final := false
		for _, m := range c.msgs {
			if e, ok := m.(*rap.SubscriptionEvent); ok && !final {
				evs = append(evs, e) // events after the final one are not returned
				final = e.Final
			}
		}
		avail := evs[min(c.eventsOut, len(evs)):]
		if len(avail) >= n || final {
			out = avail[:min(n, len(avail))]
			c.eventsOut += len(out)
			return true
		}
		return false
	})
	if err == nil && len(out) < n {
		return out, fmt.Errorf("raptest: call %s: the subscription ended with a final event after %d of the %d events asked for", c.Invocation.ID, len(out), n)
	}
	return out, err
}

// Messages returns every accepted callback of this call so far, in arrival
// order, without moving any cursor.
func (c *Call) Messages() []rap.Callback {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]rap.Callback(nil), c.msgs...)
}

// Release forgets the messages Next has already returned, except the
// tool_result, so that a long-lived subscription followed with Next holds
// only what it has not read yet: a program that follows one for hours (rap
// mcp serve) calls it after each message. Messages no longer returns the
// forgotten messages, and Events never returns events forgotten before it
// read them; Result keeps working.
func (c *Call) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := make([]rap.Callback, 0, len(c.msgs)-c.next+1)
	next, dropped := 0, 0
	for i, m := range c.msgs {
		_, isResult := m.(*rap.ToolResult)
		switch {
		case i >= c.next:
			kept = append(kept, m)
		case isResult:
			kept = append(kept, m)
			next++
		default:
			if _, ok := m.(*rap.SubscriptionEvent); ok {
				dropped++
			}
		}
	}
	c.msgs, c.next = kept, next
	c.eventsOut = max(c.eventsOut-dropped, 0)
}

// Cancel POSTs {thread_id, tool_call_id} for this call to the tool
// server's /cancel_tool_call (RAP CA-1) and returns an error unless it
// answers 200 (RAP CA-2). The call keeps accepting callbacks: a tool may
// still send a result.
func (c *Call) Cancel(ctx context.Context) error {
	body, _ := json.Marshal(rap.CancelToolCallRequest{ThreadID: c.Invocation.GroupID, ToolCallID: c.Invocation.ID})
	return c.rt.post(ctx, c.BaseURL+"/cancel_tool_call", body)
}

// Close forgets the call: later callbacks to its URL are answered 404 and
// recorded as errors. Long-running users of a Runtime (such as a load
// generator) close calls they are done with to free their memory.
func (c *Call) Close() { c.rt.forget(c.token) }
