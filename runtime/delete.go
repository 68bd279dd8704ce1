package runtime

// This file owns deleting a whole session (a root thread and its
// children): DeleteSession closes what is still open and tells the tool
// servers, waits for those notices, removes every record of the session
// in one transaction, and forgets what the engine keeps of it in memory
// (delete_forget.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// ErrSessionMoving is a session being moved to another runtime right now
// (see DeleteSession).
var ErrSessionMoving = api.ErrSessionMoving

// maxNoticesAtOnce bounds the /close_thread POSTs DeleteSession has in
// flight at once, whatever the number of threads and tool servers.
const maxNoticesAtOnce = 16

// DeleteSession deletes the session whose root thread is rootID, and
// reports how many threads (the root and its children) it removed.
//
// First every open thread of the session is closed as CloseThread closes
// one (its pending calls cancelled, its subscriptions ended, its timers
// dropped), and every tool server is sent /close_thread for each of them
// (RAP TC-1): DeleteSession waits until each of those POSTs was answered
// or failed (each is bounded by a timeout and never retried), so that a
// tool server hears of the closing while the session still exists. Then
// one transaction removes every record of the session's threads:
// histories, inbox, calls, subscriptions, views, timers, choices, leases
// and client events. Last, the engine forgets what it kept of them in
// memory, and ends the client event streams of those threads in this
// process with an error event saying that the session was deleted (no
// thread_closed event is sent for the threads it closed: their streams
// end). On a store several processes share, the streams other processes
// serve get no more events, and their clients find the session gone
// (404) when they reconnect.
//
// A callback that arrives afterwards for one of the session's calls is
// answered 404 and changes nothing (RAP RE-5). The deletion is durable:
// the session stays gone after a restart, in every process sharing the
// store.
//
// Errors: an id that does not exist, or that the Caller of ctx may not see
// (a caller bound to a user sees only that user's sessions), wraps
// ErrUnknownThread, and so does a session deleted already; the id of a
// child thread wraps ErrBadInput and names its session; a session being
// moved to or from another runtime wraps ErrSessionMoving.
func (r *Runtime) DeleteSession(ctx context.Context, rootID string) (int, error) {
	return r.deleteSession(ctx, rootID, false)
}

// errNotExpired is a session retention found open again when it came to
// delete it: it is kept.
var errNotExpired = errors.New("the session has open threads")

// deleteSession is DeleteSession; with onlyClosed (retention) it deletes
// the session only when every thread of it is closed, and otherwise
// returns errNotExpired without changing anything.
func (r *Runtime) deleteSession(ctx context.Context, rootID string, onlyClosed bool) (int, error) {
	// Step 1: close what is open, as CloseThread does.
	fx := &effects{}
	err := r.store.Update(ctx, func(tx store.Tx) error {
		*fx = effects{}
		threads, err := r.sessionToDelete(ctx, tx, rootID)
		if err != nil {
			return err
		}
		return r.closeForDelete(tx, threads, onlyClosed, fx)
	})
	if err != nil {
		return 0, err
	}
	r.apply(quiet(fx))
	r.noticeAndWait(fx.notices)

	// Step 2: remove the records. Threads may have been opened since
	// (a slice in flight spawned a child): they are closed here, and told
	// once the records are gone (the notice carries the thread id only).
	var ids []string
	var n int
	fx2 := &effects{}
	err = r.store.Update(ctx, func(tx store.Tx) error {
		*fx2 = effects{}
		threads, err := r.sessionToDelete(ctx, tx, rootID)
		if err != nil {
			return err
		}
		if err := r.closeForDelete(tx, threads, onlyClosed, fx2); err != nil {
			return err
		}
		ids = ids[:0]
		for _, th := range threads {
			ids = append(ids, th.ID)
		}
		if n, err = tx.DeleteSession(rootID); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w %q", ErrUnknownThread, rootID)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.forgetThreads(rootID, ids)
	r.noticeAndWait(fx2.notices)
	r.kickTimer() // the session's timers are gone
	r.log.Info("session deleted", "audit", true, "session", rootID, "threads", n, "by_retention", onlyClosed)
	return n, nil
}

// sessionToDelete returns the threads of the session rootID names, after
// the checks of DeleteSession.
func (r *Runtime) sessionToDelete(ctx context.Context, tx store.Tx, rootID string) ([]store.Thread, error) {
	th, err := visibleThread(ctx, tx, rootID)
	if err != nil {
		return nil, err
	}
	if th.ParentID != "" {
		return nil, inputError(fmt.Sprintf("thread %s belongs to session %s; delete the session (its root thread %s), which deletes all of its threads", th.ID, th.RootID, th.RootID))
	}
	if err := refuseMoving(tx, th.ID); err != nil {
		return nil, err
	}
	return tx.SessionThreads(th.ID)
}

// refuseMoving returns an error wrapping ErrSessionMoving when the session
// is leaving for another runtime (MoveLeaving) or arriving from one and
// not yet committed (MoveArriving).
func refuseMoving(tx store.Tx, rootID string) error {
	for _, m := range []struct {
		dir   store.MoveDirection
		state store.MoveState
		say   string
	}{
		{store.MoveOut, store.MoveLeaving, "to"},
		{store.MoveOut, store.MoveSending, "to"},
		{store.MoveIn, store.MoveArriving, "from"},
	} {
		mv, err := tx.SessionMove(rootID, m.dir)
		if errors.Is(err, store.ErrNotFound) || (err == nil && mv.State != m.state) {
			continue
		}
		if err != nil {
			return err
		}
		if mv.State == m.state {
			return fmt.Errorf("session %s: %w (%s %s); try again once the move has ended", rootID, ErrSessionMoving, m.say, redact(mv.Peer))
		}
	}
	return nil
}

// closeForDelete closes the open threads among threads, children before
// their parents; with onlyClosed it refuses instead (errNotExpired).
func (r *Runtime) closeForDelete(tx store.Tx, threads []store.Thread, onlyClosed bool, fx *effects) error {
	for i := len(threads) - 1; i >= 0; i-- {
		th := threads[i]
		if th.Status == store.ThreadClosed {
			continue
		}
		if onlyClosed {
			return fmt.Errorf("session %s: thread %s is open: %w", th.RootID, th.ID, errNotExpired)
		}
		if err := r.closeThreadTx(tx, th, fx); err != nil {
			return err
		}
	}
	return nil
}

// quiet returns fx without its notices, which noticeAndWait sends, and
// without its client events: they would tell only the session's own
// threads of their closing, whose streams end once the session is gone
// (forgetThreads); on a shared store an event stored after the deletion
// would leave rows of the deleted threads behind.
func quiet(fx *effects) *effects {
	c := *fx
	c.notices, c.events = nil, nil
	return &c
}

// noticeAndWait POSTs each notice to every configured tool server,
// concurrently (at most maxNoticesAtOnce at a time), each once and bounded
// by notifyTimeout, and returns when all were answered or failed (RAP
// TC-1: failures are logged, never retried, and stop nothing).
func (r *Runtime) noticeAndWait(notices []notice) {
	if len(notices) == 0 || len(r.cfg.ToolServers) == 0 {
		return
	}
	sem := make(chan struct{}, maxNoticesAtOnce)
	var wg sync.WaitGroup
	for _, n := range notices {
		b, err := json.Marshal(n.body)
		if err != nil {
			r.log.Error("encode tool server notification", "path", n.path, "err", err)
			continue
		}
		for _, base := range r.cfg.ToolServers {
			r.mu.Lock()
			if r.stopping {
				r.mu.Unlock()
				wg.Wait()
				return
			}
			r.wg.Add(1)
			r.mu.Unlock()
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done(); r.wg.Done() }()
				url := strings.TrimRight(base, "/") + n.path
				status, _, err := r.postOnce(r.baseCtx, url, b, notifyTimeout)
				r.log.Info("rap notification", "audit", true, "path", n.path, "server", redact(base), "status", status, "error", errString(err))
			}()
		}
	}
	wg.Wait()
}
