package runtime

// This file scopes the client API to the user a request comes from: an
// authenticating front (rap serve's client tokens) says who the caller is,
// and a caller bound to a user sees and drives only that user's sessions.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gorap/gorap/runtime/store"
)

// Caller is who a client API request comes from, as the front that
// authenticated it decided.
type Caller struct {
	// UserID is the user the caller acts for. A caller with a user id
	// sees only the sessions of that user, and the sessions it creates
	// belong to that user whatever the request says.
	UserID string
	// Admin callers see and drive every session, as requests without a
	// Caller do.
	Admin bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c: the client API then answers the
// request for c (see Caller). A front that authenticates requests sets it
// before Handler sees them; without one every request acts as an admin.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller of ctx, if a front set one.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// scopedUser returns the user a request is restricted to, and whether it
// is restricted at all.
func scopedUser(req *http.Request) (string, bool) {
	return callerUser(req.Context())
}

// callerUser returns the user the Caller of ctx is restricted to, and
// whether it is restricted at all (no Caller, or an admin, is not).
func callerUser(ctx context.Context) (string, bool) {
	c, ok := CallerFrom(ctx)
	if !ok || c.Admin {
		return "", false
	}
	return c.UserID, true
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
	if user, scoped := callerUser(ctx); scoped && th.UserID != user {
		return store.Thread{}, fmt.Errorf("%w %q", ErrUnknownThread, id)
	}
	return th, nil
}

// owned wraps a handler of a route with a thread {id}: a caller bound to
// a user gets 404, as for a thread that does not exist, when the thread
// belongs to another user's session.
func (r *Runtime) owned(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		user, scoped := scopedUser(req)
		if !scoped {
			h(w, req)
			return
		}
		id := req.PathValue("id")
		var th store.Thread
		err := r.store.View(req.Context(), func(tx store.Tx) error {
			var err error
			th, err = tx.Thread(id)
			return err
		})
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && th.UserID != user):
			writeError(w, http.StatusNotFound, fmt.Sprintf("%v %q", ErrUnknownThread, id))
		case err != nil:
			r.writeStoreError(w, err)
		default:
			h(w, req)
		}
	}
}
