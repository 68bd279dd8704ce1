package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions (first part): for an MCP server
// that advertises resources.subscribe, the bridge adds the tool
// {name}_subscribe_resource. A call of it is a RAP subscription (RAP
// SU-1): each notifications/resources/updated for its URI becomes a
// subscription event carrying the re-read resource, and cancelling the
// subscription unsubscribes. Not yet: surviving a restart of the bridge
// itself (the bridge keeps no durable store).

// SubscribeToolName is the name of the subscription tool after the
// server's name and "_": the bridge of server "files" serves
// "files_subscribe_resource", so that two bridged servers never offer
// the same name (see Bridge.OwnToolName).
const SubscribeToolName = "subscribe_resource"

// maxInlineResource bounds the text of a resource carried in an event;
// larger contents are described by URI, type and size.
const maxInlineResource = 16 << 10

var subscribeSchema = json.RawMessage(`{"type":"object","properties":{"uri":{"type":"string","minLength":1,"description":"URI of the MCP resource to watch, such as file:///path or a URI a tool returned."}},"required":["uri"],"additionalProperties":false}`)

type subscribeArgs struct {
	URI string `json:"uri"`
}

// watchers routes notifications/resources/updated to subscriptions.
type watchers struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

func (w *watchers) add(uri string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	if w.m[uri] == nil {
		w.m[uri] = map[chan struct{}]struct{}{}
	}
	w.m[uri][ch] = struct{}{}
	return ch
}

func (w *watchers) remove(uri string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m[uri], ch)
	if len(w.m[uri]) == 0 {
		delete(w.m, uri)
	}
}

// updated wakes the subscriptions of uri; updates that arrive while one
// is being read coalesce into one more read.
func (w *watchers) updated(uri string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[uri] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// addSubscribeTool registers {name}_subscribe_resource when the server
// supports resource subscriptions, no MCP tool has that name, and the
// mode is direct (proxy mode serves exactly the two CF-2 tools).
func (b *Bridge) addSubscribeTool(cs *sdk.ClientSession) {
	ir := cs.InitializeResult()
	if b.opts.Mode == ModeProxy || ir == nil || ir.Capabilities == nil || ir.Capabilities.Resources == nil || !ir.Capabilities.Resources.Subscribe {
		return
	}
	name := b.OwnToolName(SubscribeToolName)
	b.mu.Lock()
	_, taken := b.tools[name]
	b.mu.Unlock()
	if taken {
		b.log.Warn("mcp bridge: the MCP server has a tool named like the bridge's subscription tool; resource subscriptions are not offered", "tool", name)
		return
	}
	rap.AddSubscription(b.srv, &rap.Tool{
		Name: name,
		Description: fmt.Sprintf("Watch a resource of the MCP server %q: confirms at once, then sends an event with the resource's new contents each time the server reports a change. Cancel the subscription to stop.",
			b.opts.Name),
		InputSchema:   subscribeSchema,
		Annotations:   &rap.Annotations{ReadOnly: true, LongRunning: true},
		DisplayScript: rhaiString("Watching ") + ` + args["uri"]`,
	}, b.subscribe, rap.ConfirmInHandler())
}

// subscribe serves one subscribe_resource call.
func (b *Bridge) subscribe(ctx context.Context, sub *rap.Subscription, in subscribeArgs) error {
	wake := b.watchers.add(in.URI)
	defer b.watchers.remove(in.URI, wake)
	cs, err := b.currentSession(ctx, b.opts.RestartWait)
	if err != nil {
		return err
	}
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: in.URI}); err != nil {
		return fmt.Errorf("Error: the MCP server %q refused the subscription to %s: %v. Check the URI (list the server's resources) and try again.", b.opts.Name, in.URI, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if cur, err := b.currentSession(uctx, 0); err == nil {
			_ = cur.Unsubscribe(uctx, &sdk.UnsubscribeParams{URI: in.URI})
		}
	}()
	if err := sub.Confirm(ctx); err != nil {
		return err
	}
	for {
		b.mu.Lock()
		restarted := b.restarted
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-restarted:
			// A new MCP session: subscribe again there.
			if cs, err = b.currentSession(ctx, b.opts.RestartWait); err == nil {
				err = cs.Subscribe(ctx, &sdk.SubscribeParams{URI: in.URI})
			}
			if err != nil {
				b.log.Warn("mcp bridge: renewing a resource subscription after a restart failed", "uri", in.URI, "error", err)
			}
		case <-wake:
			text := b.readForEvent(ctx, in.URI)
			if err := sub.Emit(ctx, text); err != nil {
				return err
			}
		}
	}
}

// readForEvent re-reads uri and returns the event text: JSON with the
// contents inline when small, else their URI, type and size.
func (b *Bridge) readForEvent(ctx context.Context, uri string) string {
	type item struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType,omitempty"`
		Text     string `json:"text,omitempty"`
		Size     int    `json:"size,omitempty"`
		Note     string `json:"note,omitempty"`
	}
	ev := struct {
		Event    string `json:"event"`
		URI      string `json:"uri"`
		Contents []item `json:"contents,omitempty"`
		Error    string `json:"error,omitempty"`
	}{Event: "resource_updated", URI: uri}
	cs, err := b.currentSession(ctx, b.opts.RestartWait)
	var res *sdk.ReadResourceResult
	if err == nil {
		res, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	}
	if err != nil {
		ev.Error = fmt.Sprintf("the resource changed but re-reading it failed: %v", err)
	} else {
		for _, c := range res.Contents {
			if c == nil {
				continue
			}
			it := item{URI: c.URI, MIMEType: c.MIMEType}
			switch {
			case c.Blob != nil:
				it.Size, it.Note = len(c.Blob), "binary contents not included"
			case len(c.Text) > maxInlineResource:
				it.Size, it.Note = len(c.Text), "large text not included; read the resource to see it"
			default:
				it.Text = c.Text
			}
			ev.Contents = append(ev.Contents, it)
		}
	}
	raw, _ := json.Marshal(ev)
	return string(raw)
}
