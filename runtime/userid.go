package runtime

// This file owns the user id of a session (RAP IN-1, IN-5): its checks and
// the cache of each root thread's user id.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/gorap/gorap/runtime/store"
)

// MaxUserIDBytes bounds a session's user id.
const MaxUserIDBytes = 256

// checkUserID says what is wrong with a user id, if anything. Empty is
// allowed (no user id).
func checkUserID(id string) error {
	if len(id) > MaxUserIDBytes {
		return fmt.Errorf("has %d bytes, the limit is %d", len(id), MaxUserIDBytes)
	}
	if !utf8.ValidString(id) {
		return errors.New("is not valid UTF-8")
	}
	for _, c := range id {
		if unicode.IsControl(c) {
			return fmt.Errorf("contains the control character %U; use printable characters only", c)
		}
	}
	return nil
}

// maxRememberedUsers bounds the in-memory map of session user ids; a
// forgotten one is read again from the store.
const maxRememberedUsers = 10000

// userCache remembers the user id of sessions (root threads), which never
// changes, so that a dispatch reads it from the store at most once per
// session. Its zero value is ready to use.
type userCache struct {
	mu    sync.Mutex
	users map[string]string
}

func (u *userCache) get(rootID string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	id, ok := u.users[rootID]
	return id, ok
}

func (u *userCache) put(rootID, userID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.users == nil || len(u.users) >= maxRememberedUsers {
		u.users = map[string]string{}
	}
	u.users[rootID] = userID
}

// sessionUser returns the user id of the session whose root thread is
// rootID.
func (r *Runtime) sessionUser(ctx context.Context, rootID string) (string, error) {
	if id, ok := r.users.get(rootID); ok {
		return id, nil
	}
	var th store.Thread
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		th, err = tx.Thread(rootID)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("load the user of session %s: %w", rootID, err)
	}
	r.users.put(rootID, th.UserID)
	return th.UserID, nil
}
