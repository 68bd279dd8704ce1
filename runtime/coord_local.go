package runtime

// This file owns the local implementation of the seam (coord.go): a runtime
// that is the only process on its store (SQLite). The worker map of
// claim.go is the whole claim of a thread, every input is committed, and
// wakes its thread, in this process, and every due timer is this process's
// to fire.

import (
	"context"

	"github.com/gorap/gorap/runtime/store"
)

// localCoord is the coord of a runtime alone on its store; its events
// half is localEvents (coord_local_events.go).
type localCoord struct {
	*localEvents
	r *Runtime
	// claim is every worker's claim: nothing to hold beyond the worker map.
	claim *localClaim
}

// newLocalCoord returns the coord of r alone on its store, and gives r's
// hub its events; r.baseCtx is set.
func newLocalCoord(r *Runtime) *localCoord {
	c := &localCoord{localEvents: newLocalEvents(r.hub), r: r, claim: &localClaim{ctx: r.baseCtx}}
	r.hub.ev = c.localEvents
	return c
}

func (c *localCoord) start() {}

func (c *localCoord) claimThread(string) threadClaim { return c.claim }

func (c *localCoord) inputClaim(string) inputClaim { return noInputClaim{} }

func (c *localCoord) handBack(string, threadClaim) threadClaim { return nil }

func (c *localCoord) held(context.Context) error { return nil }

func (c *localCoord) bounded(ctx context.Context) (context.Context, func()) { return ctx, noop }

func (c *localCoord) fence(context.Context, store.Tx, string) error { return nil }

func (c *localCoord) update(ctx context.Context, fn func(store.Tx) error) error {
	return c.r.store.Update(ctx, fn)
}

// markDispatched commits the mark at once: concurrent marks share a
// transaction and a sync through the store's group commit.
func (c *localCoord) markDispatched(ctx context.Context, call store.Call) error {
	threadID, callID := call.ThreadID, call.CallID // the closure copies only these
	return c.r.store.Update(ctx, func(tx store.Tx) error {
		_, err := tx.SetCallState(threadID, callID, store.CallDispatched, store.CallNew)
		return err
	})
}

func (c *localCoord) callEnded(string, string) {}

func (c *localCoord) releaseInCommit(context.Context, string) commitRelease { return nil }

func (c *localCoord) claimTimer(store.Tx, string) (bool, error) { return true, nil }

func (c *localCoord) exportsStoreGauges(context.Context) (bool, error) { return true, nil }

// noop does nothing.
func noop() {}

// localClaim is a worker's claim of its thread on a store one process
// holds: it never ends early.
type localClaim struct{ ctx context.Context }

func (c *localClaim) context() context.Context { return c.ctx }

func (c *localClaim) lost() error { return nil }

func (c *localClaim) handedBack() bool { return false }

func (c *localClaim) end(bool) {}
