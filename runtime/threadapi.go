package runtime

// This file owns the Go API on threads that the client API
// (runtime/httpapi) and embedders call: create a thread, post a user message (its inbox row, then
// wake: claim.go), read its history, list threads, wait until a thread is
// idle. Closing is in close.go, user choices in choices.go, live events in
// events.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// CreateThread creates a root thread (a new session) for the configured
// default user (Config.DefaultUserID), discovers its toolsets (RAP TS-4 to
// TS-7) and returns its id. Discovery problems do not fail the call: they
// are logged and reported as a "toolsets" event.
func (r *Runtime) CreateThread(ctx context.Context) (string, error) {
	return r.CreateThreadFor(ctx, "")
}

// CreateThreadFor is CreateThread for the end user userID: every
// invocation of the session, its child threads' included, carries it as
// user_id (RAP IN-1), so tools that keep credentials per user find them.
// An empty userID means Config.DefaultUserID. The caller vouches for the
// id: take it only from an authenticated client or trusted configuration.
func (r *Runtime) CreateThreadFor(ctx context.Context, userID string) (string, error) {
	if err := checkUserID(userID); err != nil {
		return "", fmt.Errorf("%w: user_id %v", ErrBadInput, err)
	}
	if userID == "" {
		userID = r.cfg.DefaultUserID
	}
	id := store.NewThreadID()
	th := store.Thread{ID: id, RootID: id, Status: store.ThreadActive, UserID: userID}
	if err := r.store.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(th) }); err != nil {
		return "", fmt.Errorf("create thread: %w", err)
	}
	r.users.put(id, userID) // its first dispatch need not read it back
	r.discover(ctx, id)
	return id, nil
}

// PostMessage adds a user message to the thread's inbox and wakes it. It
// returns once the message is durable; the thread processes it
// asynchronously (at once, even while tool calls are pending: RAP RT-3).
func (r *Runtime) PostMessage(ctx context.Context, threadID, text string) error {
	_, err := r.PostMessageWithKey(ctx, threadID, text, "")
	return err
}

// ErrUnknownThread is returned (wrapped) for a thread id that does not
// exist, or that the Caller of the context may not see.
var ErrUnknownThread = api.ErrUnknownThread

// ErrBadInput is returned (wrapped) for input the runtime refuses.
var ErrBadInput = api.ErrBadInput

// PostMessageWithKey is PostMessage with an idempotency key, as POST
// /v1/threads/{id}/messages takes it (Idempotency-Key): a message whose
// non-empty key the thread saw already adds nothing and reports
// added=false. An empty key adds the message every time.
func (r *Runtime) PostMessageWithKey(ctx context.Context, threadID, text, idemKey string) (added bool, err error) {
	if strings.TrimSpace(text) == "" {
		return false, fmt.Errorf("%w: message text is empty; send {\"text\": \"...\"}", ErrBadInput)
	}
	if len(text) > MaxMessageBytes {
		return false, fmt.Errorf("%w: message text has %d bytes, the limit is %d", ErrBadInput, len(text), MaxMessageBytes)
	}
	release, err := r.admitInput(threadID)
	if err != nil {
		return false, err
	}
	defer release()
	key := "user:" + uuid.NewString()
	if idemKey != "" {
		key = "user:" + threadID + ":" + idemKey
	}
	payload, _ := json.Marshal(store.UserMessage{Text: text})
	fx := &effects{}
	err = r.store.Update(ctx, func(tx store.Tx) error {
		*fx = effects{}
		th, err := visibleThread(ctx, tx, threadID)
		if err != nil {
			return err
		}
		if th.Status == store.ThreadClosed {
			return fmt.Errorf("%w: thread %s is closed; create a new thread", ErrBadInput, threadID)
		}
		added, err = tx.Enqueue(store.InboxItem{ThreadID: threadID, Kind: store.KindUserMessage, Payload: payload, DedupKey: key})
		if err != nil || !added || th.ParentID != "" || th.FirstMessage != "" {
			return err
		}
		return r.noteFirstMessage(tx, th, text, fx)
	})
	if err != nil {
		return false, err
	}
	r.apply(fx)
	if added {
		r.wake(threadID)
	}
	return added, nil
}

// History returns the thread's messages in order, as the client API shows
// them (GET /v1/threads/{id}/messages).
func (r *Runtime) History(ctx context.Context, threadID string) ([]api.Message, error) {
	var msgs []api.Message
	err := r.store.View(ctx, func(tx store.Tx) error {
		if _, err := visibleThread(ctx, tx, threadID); err != nil {
			return err
		}
		history, err := tx.History(threadID)
		msgs = apiSlice(history, apiMessage)
		return err
	})
	return msgs, err
}

// Threads lists every thread, oldest first, as the client API shows them;
// for a Caller bound to a user (WithCaller), only that user's.
func (r *Runtime) Threads(ctx context.Context) ([]api.Thread, error) {
	var out []api.Thread
	err := r.store.View(ctx, func(tx store.Tx) error {
		threads, err := tx.ListThreads()
		if user, scoped := api.ScopedUser(ctx); scoped {
			threads = slices.DeleteFunc(threads, func(th store.Thread) bool { return th.UserID != user })
		}
		out = apiSlice(threads, apiThread)
		return err
	})
	return out, err
}

// ThreadInfo returns the thread's state as GET /v1/threads/{id} answers
// it: the thread, its pending calls, subscriptions, waiting choices, first
// children, queued inputs and token usage. A thread that does not exist,
// or belongs to another user when ctx carries a Caller bound to a user, is
// ErrUnknownThread.
func (r *Runtime) ThreadInfo(ctx context.Context, threadID string) (api.ThreadInfo, error) {
	var info api.ThreadInfo
	err := r.store.View(ctx, func(tx store.Tx) error {
		th, err := visibleThread(ctx, tx, threadID)
		if err != nil {
			return err
		}
		info, err = r.readThreadInfo(tx, th)
		return err
	})
	if err == nil && info.Thread.ParentID == "" {
		info.Budgets = r.sessionBudgets(ctx, threadID)
		info.SessionBudget = r.sessionBudgetInfo(ctx, threadID)
	}
	return info, err
}

// Idle waits until the thread has no running slice, no dispatch in flight
// and an empty inbox, or until ctx ends. Tool calls waiting for their
// results do not count: a thread waiting for a tool is idle. If the last
// slice failed (say, the model was unreachable) its inputs stay queued and
// Idle returns an error wrapping ErrSliceFailed.
func (r *Runtime) Idle(ctx context.Context, threadID string) error {
	for {
		r.mu.Lock()
		ch := r.changedLocked()
		_, running := r.threads[threadID]
		busy := running || r.inflight[threadID] > 0
		failed := r.failed[threadID]
		r.mu.Unlock()
		if !busy && failed != nil {
			return fmt.Errorf("thread %s: %w: %v", threadID, ErrSliceFailed, failed)
		}
		if !busy {
			var queued []store.InboxItem
			err := r.store.View(ctx, func(tx store.Tx) error {
				var err error
				queued, err = tx.Queued(threadID)
				return err
			})
			if err != nil {
				return err
			}
			if len(queued) == 0 {
				return nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for thread %s to be idle: %w", threadID, ctx.Err())
		case <-time.After(250 * time.Millisecond):
			// Re-check: a model failure leaves rows queued until the next
			// message, so Idle must not wait for a change forever.
		}
	}
}
