// Package clientauth authenticates requests of a runtime's client API
// with bearer tokens: an admin token (RAP_TOKEN) that sees every session,
// and a file of tokens each bound to a user, who then sees and drives only
// their own sessions (runtime.Caller). The file holds SHA-256 digests, not
// tokens, must be private to its owner (mode 0600), and is read again when
// it changes, so tokens are added and revoked without a restart.
//
// A tokens file, in TOML:
//
//	[[tokens]]
//	name = "alice-laptop"   # for people and logs; optional
//	user = "alice"          # the sessions this token sees and creates
//	sha256 = "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea"
//
//	[[tokens]]
//	name = "ops"
//	admin = true            # sees every user's sessions
//	sha256 = "..."
//
// "rap token add" creates a token and appends its entry.
package clientauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/BurntSushi/toml"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/runtime"
)

// Entry is one token of a tokens file.
type Entry struct {
	// Name says whose token it is, for people and logs; it is not secret.
	Name string `toml:"name"`
	// User is the user whose sessions the token sees and creates; empty
	// only for an admin token.
	User string `toml:"user"`
	// Admin tokens see and drive every session.
	Admin bool `toml:"admin"`
	// SHA256 is the lowercase hex SHA-256 digest of the token.
	SHA256 string `toml:"sha256"`
}

type file struct {
	Tokens []Entry `toml:"tokens"`
}

// recheckEvery is how often, at most, the tokens file is looked at for
// changes (on a request).
var recheckEvery = time.Second

// Authenticator checks the bearer token of client API requests.
type Authenticator struct {
	admin    [32]byte // the admin token's digest
	hasAdmin bool
	path     string
	log      *slog.Logger
	recheck  time.Duration // recheckEvery when made

	set      atomic.Pointer[tokenSet] // the file's tokens
	stop     chan struct{}            // closed by Close
	stopOnce sync.Once

	mu        sync.Mutex // guards what follows: the file's last reading
	lastCheck time.Time
	stamp     fileStamp
	lastErr   string
}

// tokenSet is one reading of the tokens file. Its ctx ends when a later
// reading replaces it, so that requests authenticated by it (event
// streams) are checked again.
type tokenSet struct {
	byDigest map[[32]byte]Entry
	ctx      context.Context
	cancel   context.CancelFunc
}

func newTokenSet(m map[[32]byte]Entry) *tokenSet {
	ctx, cancel := context.WithCancel(context.Background())
	return &tokenSet{byDigest: m, ctx: ctx, cancel: cancel}
}

// replace makes ts the tokens in force and ends the previous set.
func (a *Authenticator) replace(ts *tokenSet) {
	if old := a.set.Swap(ts); old != nil {
		old.cancel()
	}
}

type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
	perm os.FileMode // a chmod that opens the file must be noticed
}

// New returns an Authenticator that accepts adminToken (if not empty) as
// an admin and the tokens of the file at path (if not empty). It fails
// when neither is given, or when the file cannot be read, is open to
// other users, or has an invalid entry. logger may be nil.
func New(adminToken, path string, logger *slog.Logger) (*Authenticator, error) {
	if logger == nil {
		logger = slog.Default()
	}
	a := &Authenticator{path: path, log: logger, recheck: recheckEvery}
	if adminToken != "" {
		a.admin, a.hasAdmin = sha256.Sum256([]byte(adminToken)), true
	}
	if path == "" {
		if !a.hasAdmin {
			return nil, errors.New("no client token and no tokens file given")
		}
		a.replace(newTokenSet(nil))
		return a, nil
	}
	st, set, err := load(path)
	if err != nil {
		return nil, err
	}
	a.replace(newTokenSet(set))
	a.stamp, a.lastCheck = st, time.Now()
	a.stop = make(chan struct{})
	go a.watch()
	return a, nil
}

// watch reads the tokens file again whenever it changes, so that a
// revoked token stops working (its event streams included) even when no
// request comes to notice it.
func (a *Authenticator) watch() {
	t := time.NewTicker(max(a.recheck, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.maybeReload()
		}
	}
}

// Close stops watching the tokens file.
func (a *Authenticator) Close() {
	if a.stop != nil {
		a.stopOnce.Do(func() { close(a.stop) })
	}
}

// Tokens returns how many tokens the file gave at its last reading.
func (a *Authenticator) Tokens() int { return len(a.set.Load().byDigest) }

// Authenticate returns the caller of an "Authorization: Bearer TOKEN"
// header value, or false. The token is hashed before it is looked up, so
// the time taken tells nothing about the tokens known.
func (a *Authenticator) Authenticate(header string) (runtime.Caller, bool) {
	c, _, _, ok := a.authenticate(header)
	return c, ok
}

// authenticate is Authenticate, also returning the token's digest and
// the set that knew it (nil for the admin token, which never changes).
func (a *Authenticator) authenticate(header string) (runtime.Caller, [32]byte, *tokenSet, bool) {
	a.maybeReload()
	tok, ok := bearer.Token(header)
	if !ok {
		return runtime.Caller{}, [32]byte{}, nil, false
	}
	sum := sha256.Sum256([]byte(tok))
	isAdmin := subtle.ConstantTimeCompare(sum[:], a.admin[:]) == 1
	if a.hasAdmin && isAdmin {
		return runtime.Caller{Admin: true}, sum, nil, true
	}
	ts := a.set.Load()
	e, ok := ts.byDigest[sum]
	if !ok {
		return runtime.Caller{}, sum, nil, false
	}
	return runtime.Caller{UserID: e.User, Admin: e.Admin}, sum, ts, true
}

// errRevoked ends a request whose token was revoked while it ran.
var errRevoked = errors.New("the client token was revoked")

// untilRevoked returns ctx ended when the token of digest sum leaves the
// tokens file (or changes user), and a function that stops watching.
func (a *Authenticator) untilRevoked(ctx context.Context, sum [32]byte, ts *tokenSet) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	want := ts.byDigest[sum]
	var mu sync.Mutex
	var stop func() bool
	var check func()
	check = func() {
		cur := a.set.Load()
		if e, ok := cur.byDigest[sum]; !ok || e != want {
			cancel(errRevoked)
			return
		}
		mu.Lock()
		stop = context.AfterFunc(cur.ctx, check)
		mu.Unlock()
	}
	mu.Lock()
	stop = context.AfterFunc(ts.ctx, check)
	mu.Unlock()
	return ctx, func() {
		mu.Lock()
		stop()
		mu.Unlock()
		cancel(nil)
	}
}

// Handler returns next behind the token check: a request without a known
// token gets 401 with WWW-Authenticate; one with a token carries its
// runtime.Caller. The callback endpoint passes unchecked: each callback
// URL carries its own signed token.
func (a *Authenticator) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runtime.IsCallbackPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		c, sum, ts, ok := a.authenticate(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			bearer.Challenge(w.Header(), "rap")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "missing or wrong bearer token: send Authorization: Bearer TOKEN with your client token (rap chat reads it from RAP_TOKEN)"})
			return
		}
		ctx := runtime.WithCaller(r.Context(), c)
		if ts != nil {
			var done func()
			ctx, done = a.untilRevoked(ctx, sum, ts)
			defer done()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// maybeReload reads the tokens file again when it changed since its last
// reading, at most once every recheckEvery. A file that is gone, open to
// other users or no longer valid revokes all its tokens (the admin token
// stays) until it is fixed; the problem is logged once per change.
func (a *Authenticator) maybeReload() {
	if a.path == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if time.Since(a.lastCheck) < a.recheck {
		return
	}
	a.lastCheck = time.Now()
	st, err := stat(a.path)
	if err == nil && st == a.stamp {
		return
	}
	var set map[[32]byte]Entry
	if err == nil {
		st, set, err = load(a.path)
	}
	if err != nil {
		// Fail closed: a file that is gone, open to others or broken
		// revokes its tokens, so that removing it (or an entry) never
		// leaves a token working. The admin token stays.
		if len(a.set.Load().byDigest) > 0 {
			a.replace(newTokenSet(nil))
		}
		if msg := err.Error(); msg != a.lastErr {
			a.lastErr = msg
			a.log.Error("client tokens file unusable: its tokens are refused until it is fixed", "file", a.path, "err", err)
		}
		a.stamp = fileStamp{}
		return
	}
	a.replace(newTokenSet(set))
	a.stamp, a.lastErr = st, ""
	a.log.Info("client tokens file reloaded", "file", a.path, "tokens", len(set))
}

// load reads and checks a tokens file.
func load(path string) (fileStamp, map[[32]byte]Entry, error) {
	st, err := stat(path)
	if err != nil {
		return st, nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return st, nil, fmt.Errorf("tokens file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return st, nil, fmt.Errorf("tokens file %s can be read or written by other users (mode %04o): make it private with: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return st, nil, fmt.Errorf("tokens file: %w", err)
	}
	set, err := Parse(b)
	if err != nil {
		return st, nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return st, set, nil
}

// Parse reads the TOML of a tokens file and checks every entry; an error
// names the entry and what is wrong with it.
func Parse(b []byte) (map[[32]byte]Entry, error) {
	var f file
	md, err := toml.Decode(string(b), &f)
	if err != nil {
		return nil, err
	}
	if keys := md.Undecoded(); len(keys) > 0 {
		return nil, fmt.Errorf("unknown field %s: a [[tokens]] entry has name, user, admin and sha256", keys[0])
	}
	set := make(map[[32]byte]Entry, len(f.Tokens))
	seen := map[[32]byte]int{}
	for i, e := range f.Tokens {
		where := fmt.Sprintf("token %d", i+1)
		if e.Name != "" {
			where += fmt.Sprintf(" (%q)", e.Name)
		}
		raw, err := hex.DecodeString(e.SHA256)
		if err != nil || len(raw) != sha256.Size || strings.ToLower(e.SHA256) != e.SHA256 {
			return nil, fmt.Errorf("%s: sha256 must be the 64 lowercase hex digits of the token's SHA-256 digest (printf %%s TOKEN | sha256sum), or use 'rap token add'", where)
		}
		if e.User == "" && !e.Admin {
			return nil, fmt.Errorf("%s: give the user whose sessions it sees (user = \"alice\"), or admin = true", where)
		}
		if err := checkUser(e.User); err != nil {
			return nil, fmt.Errorf("%s: user %w", where, err)
		}
		var sum [32]byte
		copy(sum[:], raw)
		if j, dup := seen[sum]; dup {
			return nil, fmt.Errorf("%s has the same sha256 as token %d: each token must be different", where, j+1)
		}
		seen[sum] = i
		set[sum] = e
	}
	return set, nil
}

// checkUser applies the runtime's rules for a user id.
func checkUser(u string) error {
	if len(u) > runtime.MaxUserIDBytes {
		return fmt.Errorf("has %d bytes, the limit is %d", len(u), runtime.MaxUserIDBytes)
	}
	if strings.ContainsFunc(u, unicode.IsControl) {
		return errors.New("contains a control character")
	}
	return nil
}

// Digest returns the hex SHA-256 of a token, as a tokens file holds it.
func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
