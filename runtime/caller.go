package runtime

// This file scopes the Go API and the client API to the user a request
// comes from: an authenticating front (rap serve's client tokens) says who
// the caller is, and a caller bound to a user sees and drives only that
// user's sessions.

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Caller is who a client API request comes from, as the front that
// authenticated it decided (see api.Caller).
type Caller = api.Caller

// WithCaller returns ctx carrying c: the runtime's thread methods and the
// client API then answer for c (see Caller). A front that authenticates
// requests sets it before Handler sees them; without one every request
// acts as an admin.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return api.WithCaller(ctx, c)
}

// CallerFrom returns the Caller of ctx, if a front set one.
func CallerFrom(ctx context.Context) (Caller, bool) {
	return api.CallerFrom(ctx)
}

// visibleThread reads the thread id for the Caller of ctx: a thread that
// does not exist, or belongs to another user's session when the caller is
// bound to a user, is ErrUnknownThread alike.
func visibleThread(ctx context.Context, tx store.Tx, id string) (store.Thread, error) {
	th, err := tx.Thread(id)
	if errors.Is(err, store.ErrNotFound) {
		return th, fmt.Errorf("%w %q", ErrUnknownThread, id)
	}
	if err != nil {
		return th, err
	}
	if user, scoped := api.ScopedUser(ctx); scoped && th.UserID != user {
		return store.Thread{}, fmt.Errorf("%w %q", ErrUnknownThread, id)
	}
	return th, nil
}

// CheckThread returns nil when the thread exists and the Caller of ctx
// may see it, else an error wrapping ErrUnknownThread (or the store's
// error). The client API checks it before it reads a request's body.
func (r *Runtime) CheckThread(ctx context.Context, threadID string) error {
	return r.store.View(ctx, func(tx store.Tx) error {
		_, err := visibleThread(ctx, tx, threadID)
		return err
	})
}
