package runtime

// This file owns exporting sessions to a session archive and importing
// them from one (runtime/archive): the client API's export and import, and
// what a session moving here from another runtime arrives through. An
// imported session resumes at once: its queued messages wake its threads,
// its calls not yet dispatched are dispatched, its timers are armed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/archive/archivestore"
	"github.com/gorap/gorap/runtime/store"
)

// ExportSessions writes a session archive of the sessions whose root
// thread ids are given to w, or of every session the Caller of ctx may see
// when roots is empty, and reports how many it wrote. A root the Caller
// may not see, or that is a child thread, is an error wrapping
// ErrUnknownThread or ErrBadInput, returned before anything is written.
func (r *Runtime) ExportSessions(ctx context.Context, w io.Writer, roots []string) (int, error) {
	for _, root := range roots {
		err := r.store.View(ctx, func(tx store.Tx) error {
			th, err := visibleThread(ctx, tx, root)
			if err != nil {
				return err
			}
			if th.ParentID != "" {
				return fmt.Errorf("%w: thread %s is a child thread of session %s; export the session", ErrBadInput, root, th.RootID)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	aw, err := archive.NewWriter(w, generator())
	if err != nil {
		return 0, err
	}
	var keep func(store.Thread) bool
	if user, scoped := api.ScopedUser(ctx); scoped {
		keep = func(th store.Thread) bool { return th.UserID == user }
	}
	if err := archivestore.Export(ctx, r.store, aw, roots, keep); err != nil {
		return aw.Sessions(), err
	}
	return aw.Sessions(), aw.Close()
}

// generator names this program in the archives it writes.
func generator() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return "gorap " + bi.Main.Version
	}
	return "gorap"
}

// ImportSessions reads a session archive from rd and imports each of its
// sessions, each in a transaction of its own, and resumes them; it returns
// the root ids it imported. It stops at the first session it cannot read
// or import and returns the ones imported before it with the error: they
// stay, and nothing of the failed one is kept. A session whose threads
// exist here is refused (api.ErrConflict, wrapping
// archivestore.ErrExists), except one that
// moved away from this runtime and comes back. Only a Caller not bound to
// one user may import (api.ErrNotAllowed).
func (r *Runtime) ImportSessions(ctx context.Context, rd io.Reader) ([]string, error) {
	if _, scoped := api.ScopedUser(ctx); scoped {
		return nil, api.ErrNotAllowed
	}
	ar, err := archive.NewReader(rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	var resumed []*archive.Session
	roots, err := archivestore.Import(ctx, r.store, ar, func(tx store.Tx, s *archive.Session) error {
		if err := r.admitSession(tx, s.Root, true); err != nil {
			return err
		}
		resumed = append(resumed, s)
		return nil
	})
	for _, s := range resumed {
		for _, root := range roots {
			if root == s.Root {
				r.resumeImported(s)
			}
		}
	}
	switch {
	case errors.Is(err, archive.ErrInvalid):
		err = fmt.Errorf("%w: %w", ErrBadInput, err)
	case errors.Is(err, archivestore.ErrExists):
		err = fmt.Errorf("%w: %w", api.ErrConflict, err)
	}
	return roots, err
}

// admitSession runs in the transaction that imports the session root,
// or prepares its arrival (drop false): it refuses one that is moving
// away from here now, and, with drop, drops the forwarding record of one
// that moved away and comes back. The record stays until the session is
// here again: a move back that fails must not end the forwarding.
func (r *Runtime) admitSession(tx store.Tx, root string, drop bool) error {
	m, err := tx.SessionMove(root, store.MoveOut)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if m.State != store.MoveGone {
		return fmt.Errorf("%w: session %s is moving from this runtime to %s right now; wait for the move to end", api.ErrConflict, root, m.Peer)
	}
	if !drop {
		return nil
	}
	return tx.DeleteMove(root, store.MoveOut)
}

// resumeImported starts what an imported session has to do, as Start
// does after a restart: queued messages wake their threads, calls not yet
// dispatched are dispatched, timers and checks are armed.
func (r *Runtime) resumeImported(s *archive.Session) {
	// A session that had moved away from here is back: nothing of it is
	// forwarded any more.
	r.moves.drop(s.Root)
	ids := make([]string, len(s.Threads))
	for i, th := range s.Threads {
		ids[i] = th.ID
	}
	r.hub.revive(ids)
	var retry []store.Timer
	for _, tm := range s.Timers {
		retry = append(retry, store.Timer{ID: tm.ID, ThreadID: tm.Thread, Kind: tm.Kind})
	}
	r.retries.add(retry)
	if len(s.Timers) > 0 {
		r.kickTimer()
	}
	for _, c := range s.Calls {
		if c.State == string(store.CallNew) {
			r.dispatchAsync(store.Call{ThreadID: c.Thread, CallID: c.CallID, ToolName: c.ToolName, Arguments: c.Arguments,
				Toolset: c.Toolset, Endpoint: c.Endpoint, TurnSeq: c.TurnSeq, State: store.CallNew, Deadline: c.Deadline,
				Created: c.Created, Updated: c.Updated}, nil)
		}
	}
	if len(s.CallChecks) > 0 {
		r.kickCallStatus(time.Now())
	}
	woken := map[string]bool{}
	for _, it := range s.Inbox {
		if !woken[it.Thread] {
			woken[it.Thread] = true
			r.wake(it.Thread)
		}
	}
}
