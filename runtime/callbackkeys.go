package runtime

// This file owns the callback tokens and their keys: the token of a
// callback URL (thread, call and an HMAC over them, RAP TR-5, TR-7) and
// its check; the key kept in a file of the data directory
// (LoadOrCreateSecret); and the keys kept in the store
// when Config.KeysFromStore is set, so that a URL minted by one process is
// accepted by every process sharing the store, with the previous key
// accepted during a rotation's grace.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"encoding/base64"
	"os"
	"path/filepath"

	"github.com/gorap/gorap/internal/privfile"
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
	p := macers.pool(key)
	m := p.Get().(hash.Hash)
	m.Reset()
	msg := make([]byte, 0, len(macPrefix)+len(threadID)+1+len(callID))
	msg = append(append(append(append(msg, macPrefix...), threadID...), 0), callID...)
	m.Write(msg)
	sum := m.Sum(nil)
	p.Put(m)
	return sum
}

const macPrefix = "gorap-callback-v1\x00"

// macers keeps keyed HMAC states for reuse, one pool per key: a MAC is
// computed for every callback URL minted and every callback checked, and
// hmac.New hashes the key and allocates its digests each time.
var macers = macPools{pools: map[string]*sync.Pool{}}

type macPools struct {
	mu    sync.Mutex
	pools map[string]*sync.Pool
}

// pool returns key's pool. Keys change only on rotation; the map is
// emptied when it holds more than a few, so rotated-out keys do not
// accumulate.
func (m *macPools) pool(key []byte) *sync.Pool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pools[string(key)]; ok {
		return p
	}
	if len(m.pools) >= 8 {
		clear(m.pools)
	}
	k := string(key)
	p := &sync.Pool{New: func() any { return hmac.New(sha256.New, []byte(k)) }}
	m.pools[k] = p
	return p
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

// maxTokenLen bounds the token part of a callback URL.
const maxTokenLen = 2048

var b64 = base64.RawURLEncoding

// callbackToken makes the token of (thread, call): both ids and an
// HMAC-SHA256 over them, base64url-encoded and joined by dots. The tool
// treats it as opaque (RAP TR-5); it authenticates the callback (RAP TR-7).
func (r *Runtime) callbackToken(threadID, callID string) string {
	return r.prefixedToken("", "", threadID, callID)
}

// prefixedToken is base and path followed by the token of (thread, call),
// built in one buffer (a callback URL is made for every invocation).
func (r *Runtime) prefixedToken(base, path, threadID, callID string) string {
	mac := r.tokenMAC(threadID, callID)
	nt, nc := b64.EncodedLen(len(threadID)), b64.EncodedLen(len(callID))
	buf := make([]byte, len(base)+len(path)+nt+1+nc+1+b64.EncodedLen(len(mac)))
	at := copy(buf, base)
	at += copy(buf[at:], path)
	b64.Encode(buf[at:], []byte(threadID))
	at += nt
	buf[at] = '.'
	at++
	b64.Encode(buf[at:], []byte(callID))
	at += nc
	buf[at] = '.'
	b64.Encode(buf[at+1:], mac)
	return string(buf)
}

func (r *Runtime) tokenMAC(threadID, callID string) []byte {
	return macWith(r.currentKeys().Current, threadID, callID)
}

func (r *Runtime) callbackURL(threadID, callID string) string {
	return r.prefixedToken(r.cfg.PublicURL, CallbackPath, threadID, callID)
}

// errBadToken is deliberately vague: a caller learns nothing about why.
var errBadToken = errors.New("invalid callback token")

// verifyToken returns the (thread, call) a token was made for, checking
// its MAC in constant time.
func (r *Runtime) verifyToken(tok string) (threadID, callID string, err error) {
	if len(tok) == 0 || len(tok) > maxTokenLen {
		return "", "", errBadToken
	}
	// The three parts are decoded into one buffer (a token is checked for
	// every callback).
	raw := []byte(tok)
	i := bytes.IndexByte(raw, '.')
	j := i + 1 + bytes.IndexByte(raw[i+1:], '.')
	if i < 0 || j <= i || bytes.IndexByte(raw[j+1:], '.') >= 0 {
		return "", "", errBadToken
	}
	p0, p1, p2 := raw[:i], raw[i+1:j], raw[j+1:]
	buf := make([]byte, b64.DecodedLen(len(p0))+b64.DecodedLen(len(p1))+b64.DecodedLen(len(p2)))
	n0, err1 := b64.Decode(buf, p0)
	n1, err2 := b64.Decode(buf[n0:], p1)
	n2, err3 := b64.Decode(buf[n0+n1:], p2)
	if err1 != nil || err2 != nil || err3 != nil || n0 == 0 || n1 == 0 {
		return "", "", errBadToken
	}
	threadID, callID = string(buf[:n0]), string(buf[n0:n0+n1])
	if !r.checkMAC(buf[n0+n1:n0+n1+n2], threadID, callID) {
		return "", "", errBadToken
	}
	return threadID, callID, nil
}

// LoadOrCreateSecret returns the callback-token key kept in
// dataDir/callback.key, creating it (32 random bytes, mode 0600 whatever
// the umask) on first use, and dataDir (mode 0700) when missing. A key
// file that others may read, as an older gorap left it, is made 0600 when
// the file system allows it.
func LoadOrCreateSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "callback.key")
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) < 16 {
			return nil, fmt.Errorf("callback secret %s has %d bytes, need at least 16: delete it to create a new one (pending callbacks will then be refused)", path, len(b))
		}
		// Best effort: a key mounted read-only stays usable.
		_ = privfile.Restrict(path)
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read callback secret: %w", err)
	}
	if err := privfile.MkdirAll(dataDir); err != nil {
		return nil, fmt.Errorf("create data dir for the callback secret: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate callback secret: %w", err)
	}
	f, err := privfile.OpenFile(path, os.O_WRONLY|os.O_EXCL)
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateSecret(dataDir) // another process created it first
	}
	if err != nil {
		return nil, fmt.Errorf("create callback secret: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write callback secret %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync callback secret %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close callback secret %s: %w", path, err)
	}
	return b, nil
}
