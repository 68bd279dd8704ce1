package runtime

// This file owns the callback keys (issue 14 item 5): the HMAC keys that
// sign callback URLs, kept in the store when Config.KeysFromStore is set so
// that a URL minted by one process is accepted by every process sharing
// the store, with the previous key accepted during a rotation's grace.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// keyReloadEvery bounds how often a callback whose MAC matches no known key
// makes the runtime read the keys again (another process may have rotated
// them).
const keyReloadEvery = time.Second

// SharedCallbackKeys returns the callback keys kept in st, storing
// proposed (or, when it is empty, 32 random bytes) as the current key when
// there is none yet: of processes starting together, the first to commit
// wins and all use its key. Pass the key of an existing callback.key file
// as proposed, so that callback URLs handed out before the upgrade keep
// working.
func SharedCallbackKeys(ctx context.Context, st store.Store, proposed []byte) (store.CallbackKeys, error) {
	var keys store.CallbackKeys
	err := st.View(ctx, func(tx store.Tx) error {
		var err error
		keys, err = tx.CallbackKeys()
		return err
	})
	if err == nil {
		return keys, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return keys, fmt.Errorf("read the callback keys from the store: %w", err)
	}
	if len(proposed) == 0 {
		proposed = make([]byte, 32)
		if _, err := rand.Read(proposed); err != nil {
			return keys, fmt.Errorf("generate a callback key: %w", err)
		}
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		var err error
		keys, err = tx.InitCallbackKey(proposed)
		return err
	})
	if err != nil {
		return keys, fmt.Errorf("store the callback key: %w", err)
	}
	return keys, nil
}

// loadKeys reads the keys from the store (Config.KeysFromStore), storing
// Config.Secret as the first key when there is none.
func (r *Runtime) loadKeys(ctx context.Context) error {
	keys, err := SharedCallbackKeys(ctx, r.store, r.cfg.Secret)
	if err != nil {
		return err
	}
	if len(keys.Current) < 16 {
		return fmt.Errorf("the callback key in the store has %d bytes, need at least 16", len(keys.Current))
	}
	r.keys.Store(&keys)
	r.keysRead.Store(time.Now().UnixNano())
	return nil
}

// currentKeys returns the keys in use: those loaded from the store, or
// Config.Secret alone.
func (r *Runtime) currentKeys() *store.CallbackKeys {
	if k := r.keys.Load(); k != nil {
		return k
	}
	return &store.CallbackKeys{Current: r.cfg.Secret}
}

// checkMAC reports whether mac is the MAC of (thread, call) under the
// current key, or the previous one while its grace lasts. When neither
// matches and the keys come from the store, it reads them again (at most
// once per keyReloadEvery) and checks once more.
func (r *Runtime) checkMAC(mac []byte, threadID, callID string) bool {
	if matchKeys(r.currentKeys(), mac, threadID, callID) {
		return true
	}
	if !r.cfg.KeysFromStore || r.store == nil {
		return false
	}
	last := r.keysRead.Load()
	if time.Since(time.Unix(0, last)) < keyReloadEvery || !r.keysRead.CompareAndSwap(last, time.Now().UnixNano()) {
		return false
	}
	ctx, cancel := context.WithTimeout(r.baseCtx, 10*time.Second)
	defer cancel()
	var keys store.CallbackKeys
	if err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		keys, err = tx.CallbackKeys()
		return err
	}); err != nil {
		r.log.Warn("reading the callback keys failed", "err", err)
		return false
	}
	r.keys.Store(&keys)
	return matchKeys(&keys, mac, threadID, callID)
}

func matchKeys(k *store.CallbackKeys, mac []byte, threadID, callID string) bool {
	if len(k.Current) > 0 && hmac.Equal(mac, macWith(k.Current, threadID, callID)) {
		return true
	}
	return len(k.Previous) > 0 && time.Now().Before(k.PreviousUntil) && hmac.Equal(mac, macWith(k.Previous, threadID, callID))
}

// macWith is the MAC of a callback token of (thread, call) under key.
func macWith(key []byte, threadID, callID string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("gorap-callback-v1\x00"))
	m.Write([]byte(threadID))
	m.Write([]byte{0})
	m.Write([]byte(callID))
	return m.Sum(nil)
}

// RotateCallbackKey replaces the callback key with a new random one kept
// in the store (Config.KeysFromStore); callback URLs signed with the old
// key stay valid for grace, in every process sharing the store, so tools
// still working on a call can answer it.
func (r *Runtime) RotateCallbackKey(ctx context.Context, grace time.Duration) error {
	if !r.cfg.KeysFromStore {
		return errors.New("rotate the callback key: the runtime's key is Config.Secret, not kept in the store; set Config.KeysFromStore")
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("generate a callback key: %w", err)
	}
	var keys store.CallbackKeys
	err := r.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.RotateCallbackKey(key, time.Now().Add(grace)); err != nil {
			return err
		}
		var err error
		keys, err = tx.CallbackKeys()
		return err
	})
	if err != nil {
		return fmt.Errorf("rotate the callback key: %w", err)
	}
	r.keys.Store(&keys)
	r.log.Info("callback key rotated", "grace", grace)
	return nil
}
