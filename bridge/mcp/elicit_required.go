package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// URL elicitation required (MCP error -32042): a server
// may answer tools/call with this error instead of sending a URL-mode
// elicitation request; its data lists the links the user must open
// first. The bridge shows each link as a RAP oauth message (RAP OA-1) on
// the call, which stays pending, waits for the server's
// notifications/elicitation/complete for each, then calls the tool
// again. (The SDK has this as an unexported middleware; the bridge does
// the same on its session.)

// maxURLElicitationRounds bounds how often one call goes through the
// link-then-retry cycle.
const maxURLElicitationRounds = 3

// urlElicitations returns the URL-mode elicitations of a -32042 error.
func urlElicitations(err error) ([]*sdk.ElicitParams, bool) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != sdk.CodeURLElicitationRequired {
		return nil, false
	}
	var data struct {
		Elicitations []*sdk.ElicitParams `json:"elicitations"`
	}
	if len(we.Data) > 0 && json.Unmarshal(we.Data, &data) != nil {
		return nil, false
	}
	var out []*sdk.ElicitParams
	for _, e := range data.Elicitations {
		if e != nil && e.Mode == "url" && e.URL != "" {
			out = append(out, e)
		}
	}
	return out, len(out) > 0
}

// elicitWaiters are the calls waiting for notifications/elicitation/complete.
type elicitWaiters struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (w *elicitWaiters) register(id string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]chan struct{}{}
	}
	ch, ok := w.m[id]
	if !ok {
		ch = make(chan struct{})
		w.m[id] = ch
	}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.m[id] == ch {
			delete(w.m, id)
		}
	}
}

func (w *elicitWaiters) complete(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.m[id]; ok {
		close(ch)
		delete(w.m, id)
	}
}

// awaitURLElicitations shows the links of a -32042 error to the call's
// user and waits until the server reports each one complete. An error is
// the call's "Error: ..." result.
func (b *Bridge) awaitURLElicitations(ctx context.Context, f *inflight, tool string, els []*sdk.ElicitParams) error {
	var waits []<-chan struct{}
	for _, e := range els {
		if e.ElicitationID == "" {
			continue
		}
		ch, done := b.elicitDone.register(e.ElicitationID)
		defer done()
		waits = append(waits, ch)
	}
	for _, e := range els {
		if err := f.call.RequestOAuth(ctx, e.URL); err != nil {
			return fmt.Errorf("Error: the MCP server %q needs the user to open a link before %q can run, and the bridge could not pass it on (%v).", b.opts.Name, tool, err)
		}
	}
	if len(waits) < len(els) {
		return fmt.Errorf("Error: the MCP server %q needs the user to open a link before %q can run; the link was shown to the user. Call the tool again once they have finished.", b.opts.Name, tool)
	}
	t := time.NewTimer(b.signInTimeout())
	defer t.Stop()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			return fmt.Errorf("Error: the user did not finish the step the MCP server %q asked for (a link shown to them) within %s; call %q again to retry.", b.opts.Name, b.signInTimeout(), tool)
		}
	}
	return nil
}

// signInTimeout bounds how long a call waits for its user.
func (b *Bridge) signInTimeout() time.Duration {
	if b.oauth != nil {
		return b.oauth.opts.SignInTimeout
	}
	return DefaultSignInTimeout
}
