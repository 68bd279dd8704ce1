package runtime

// This file owns toolset discovery (RAP TS-4 to TS-7): fetching the tool
// servers' manifests for a new session, and the session's catalog of tools
// that a slice offers to the model.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// session holds the tools of one session (root thread), built from the
// manifests cached for it.
type session struct {
	catalog *rap.Catalog
	// bases maps a loaded toolset's name to the base URL it was discovered
	// at, where its /tool_call_status lives.
	bases map[string]string
	// Loaded names the toolsets whose tools are available.
	Loaded []string `json:"loaded"`
	// Errors are the discovery and validation problems, for people.
	Errors []string `json:"errors"`
}

// toolsets is the session's EventToolsets payload.
func (s *session) toolsets() *api.Toolsets {
	return &api.Toolsets{Loaded: s.Loaded, Errors: s.Errors}
}

// discoveryTimeout bounds fetching all manifests of a new session.
const discoveryTimeout = 20 * time.Second

// discover fetches every configured tool server's manifest for a new
// session (RAP TS-4), falling back to the most recent cached copy of a
// server whose fetch fails (RAP TS-7), caches the manifests for the session
// and builds its catalog (RAP TS-5, TS-6). Problems are logged and reported
// as a "toolsets" event; they never fail thread creation.
func (r *Runtime) discover(ctx context.Context, rootID string) *session {
	// The thread exists now: finish discovery even if the caller goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discoveryTimeout)
	defer cancel()
	type fetched struct {
		raw []byte
		err error
	}
	results := make([]fetched, len(r.cfg.ToolServers))
	var wg sync.WaitGroup
	for i, base := range r.cfg.ToolServers {
		wg.Go(func() {
			_, raw, err := rap.FetchToolset(ctx, r.http, base)
			results[i] = fetched{raw: raw, err: err}
		})
	}
	wg.Wait()

	var problems []string
	var cache []store.CachedToolset
	fallback := map[string]string{} // base URL -> where its cached copy came from
	for i, base := range r.cfg.ToolServers {
		res := results[i]
		if res.err != nil {
			var verr *rap.ValidationError
			if errors.As(res.err, &verr) {
				// An invalid manifest is reported and exposes nothing (TS-5);
				// an older valid copy is not substituted for it.
				problems = append(problems, res.err.Error())
				r.log.Error("toolset rejected", "base_url", base, "err", res.err)
				continue
			}
			var old store.CachedToolset
			err := r.store.View(ctx, func(tx store.Tx) error {
				var err error
				old, err = tx.LatestToolset(base)
				return err
			})
			if err != nil {
				msg := fmt.Sprintf("tool server %s: %v; its tools are not available in this session", base, res.err)
				if !errors.Is(err, store.ErrNotFound) {
					msg += fmt.Sprintf(" (and reading the cached copy failed: %v)", err)
				}
				problems = append(problems, msg)
				r.log.Error("toolset discovery failed", "base_url", base, "err", res.err)
				continue
			}
			r.log.Warn("toolset discovery failed; using the cached copy", "base_url", base,
				"cached_at", old.Fetched, "err", res.err)
			problems = append(problems, fmt.Sprintf("tool server %s: %v; using the copy cached at %s", base, res.err, old.Fetched.Format(time.RFC3339)))
			res.raw = old.Manifest
			fallback[base] = fmt.Sprintf("the copy of its toolset document cached at %s (the tool server could not be reached)", old.Fetched.Format(time.RFC3339))
		}
		cache = append(cache, store.CachedToolset{RootID: rootID, BaseURL: base, Manifest: res.raw, Fetched: time.Now().UTC()})
	}
	// A document that does not match its pin is refused (RAP TS-11): it is
	// neither offered nor cached.
	cache, refused, err := r.verifyPins(ctx, rootID, cache, func(c store.CachedToolset) string {
		return cmp.Or(fallback[c.BaseURL], "the toolset document it serves")
	})
	problems = append(problems, refused...)
	if err != nil {
		r.log.Error("toolset pin check failed", "thread", rootID, "err", err)
	}
	if len(cache) > 0 {
		err := r.store.Update(ctx, func(tx store.Tx) error {
			for _, c := range cache {
				if err := tx.PutToolset(c); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("caching the toolsets of this session failed: %v", err))
			r.log.Error("toolset cache write failed", "thread", rootID, "err", err)
		}
	}
	s := r.buildSession(cache, problems)
	for _, e := range s.Errors {
		r.log.Error("toolset problem", "thread", rootID, "problem", e)
	}
	r.rememberSession(rootID, s)
	r.emit(rootID, EventToolsets, s.toolsets())
	return s
}

// builtCatalog is a catalog built from one set of manifests, shared by
// every session that has the same manifests.
type builtCatalog struct {
	catalog *rap.Catalog
	bases   map[string]string // toolset name -> base URL
	loaded  []string
	errors  []string
}

// maxSharedCatalogs bounds the cache of built catalogs.
const maxSharedCatalogs = 64

// buildSession parses cached manifests and builds the session's catalog.
// Sessions with identical manifests share one catalog, so creating many
// sessions against the same tool servers compiles their schemas once.
func (r *Runtime) buildSession(cache []store.CachedToolset, problems []string) *session {
	h := sha256.New()
	for _, c := range cache {
		fmt.Fprintf(h, "%d:%s%d:", len(c.BaseURL), c.BaseURL, len(c.Manifest))
		h.Write(c.Manifest)
	}
	key := string(h.Sum(nil))
	r.mu.Lock()
	built := r.built[key]
	r.mu.Unlock()
	if built == nil {
		built = buildCatalog(cache)
		r.mu.Lock()
		if len(r.built) >= maxSharedCatalogs {
			clear(r.built)
		}
		r.built[key] = built
		r.mu.Unlock()
	}
	errs := append(append([]string{}, problems...), built.errors...)
	return &session{catalog: built.catalog, bases: built.bases, Loaded: built.loaded, Errors: errs}
}

func buildCatalog(cache []store.CachedToolset) *builtCatalog {
	b := &builtCatalog{loaded: []string{}, bases: map[string]string{}}
	var sets []*rap.Toolset
	for _, c := range cache {
		ts, err := rap.ParseToolset(c.Manifest)
		if err != nil {
			b.errors = append(b.errors, fmt.Sprintf("tool server %s: %v", c.BaseURL, err))
			continue
		}
		sets = append(sets, ts)
		b.bases[ts.Name] = c.BaseURL
	}
	cat, errs := rap.NewCatalog(sets)
	for _, err := range errs {
		b.errors = append(b.errors, err.Error())
	}
	b.catalog = cat
	names := map[string]bool{}
	for _, t := range cat.Tools() {
		if !names[t.Toolset] {
			names[t.Toolset] = true
			b.loaded = append(b.loaded, t.Toolset)
		}
	}
	return b
}

// sessionOf returns the tools of the thread's session, rebuilding them from
// the store's cache after a restart (the cached copy is reused for the whole
// session, RAP TS-7).
func (r *Runtime) sessionOf(ctx context.Context, rootID string) (*session, error) {
	r.mu.Lock()
	s := r.catalogs[rootID]
	r.mu.Unlock()
	if s != nil {
		return s, nil
	}
	var cache []store.CachedToolset
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		cache, err = tx.SessionToolsets(rootID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load cached toolsets of session %s: %w", rootID, err)
	}
	// The session's copies are checked against the pins again: the
	// configured sha256 may have changed since, and a copy must still be
	// the document the session trusted on first use.
	cache, refused, err := r.verifyPins(ctx, rootID, cache, func(c store.CachedToolset) string {
		return fmt.Sprintf("this session's copy of its toolset document (fetched at %s)", c.Fetched.Format(time.RFC3339))
	})
	if err != nil {
		return nil, err
	}
	for _, p := range refused {
		r.log.Error("toolset problem", "thread", rootID, "problem", p)
	}
	s = r.buildSession(cache, refused)
	r.rememberSession(rootID, s)
	return s, nil
}

// maxRememberedSessions bounds the in-memory map of sessions; a forgotten
// session is rebuilt from the store's cache when next needed (without the
// discovery problems of its creation, which were reported then; its stored
// copies' pin problems are found again).
const maxRememberedSessions = 10000

func (r *Runtime) rememberSession(rootID string, s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.catalogs) >= maxRememberedSessions {
		clear(r.catalogs)
	}
	r.catalogs[rootID] = s
}

// toolsetBase returns the base URL the session rootID discovered toolset
// at, or false when the session has no such toolset.
func (r *Runtime) toolsetBase(ctx context.Context, rootID, toolset string) (string, bool, error) {
	s, err := r.sessionOf(ctx, rootID)
	if err != nil {
		return "", false, err
	}
	base, ok := s.bases[toolset]
	return base, ok, nil
}
