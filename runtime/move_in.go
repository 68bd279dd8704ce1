package runtime

// This file owns a session moving here from another runtime, at the
// destination (docs/migration.md): preparing (the toolsets this runtime
// serves, by name), committing the session's records in one transaction
// and resuming it, aborting, and answering the source how the move
// stands. The source authenticates preparing with this runtime's client
// token, and the other steps with the move's own secret.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/archive/archivestore"
	"github.com/gorap/gorap/runtime/store"
)

// secretDigest is what a destination keeps of a move's secret.
func secretDigest(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// PrepareMove gets this runtime ready for a session another runtime moves
// here: it refuses a session whose threads exist here (unless it moved
// away from here and comes back) and a source on this same store,
// records the move, and answers with the base URL of each toolset this
// runtime serves.
func (r *Runtime) PrepareMove(ctx context.Context, p api.MovePrepare) (api.MovePrepared, error) {
	var prep api.MovePrepared
	if _, scoped := api.ScopedUser(ctx); scoped {
		return prep, api.ErrNotAllowed
	}
	if p.Version != 1 {
		return prep, fmt.Errorf("%w: migration protocol version %d; this runtime speaks version 1", api.ErrBadInput, p.Version)
	}
	if p.ID == "" || len(p.Secret) < 32 || p.Session == "" {
		return prep, fmt.Errorf("%w: a move needs its id, a secret of at least 32 characters and the session", api.ErrBadInput)
	}
	if sh, ok := r.cfg.Store.(store.Shared); ok && p.StoreID != "" && sh.StoreID() == p.StoreID {
		return prep, fmt.Errorf("%w: the source and this runtime share one database: the session is here already", api.ErrConflict)
	}
	err := r.store.Update(ctx, func(tx store.Tx) error {
		if err := r.admitSession(tx, p.Session, false); err != nil {
			return err
		}
		if _, err := tx.Thread(p.Session); err == nil {
			return fmt.Errorf("%w: a session %s exists here already", api.ErrConflict, p.Session)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.PutMove(store.Move{RootID: p.Session, Direction: store.MoveIn, ID: p.ID, State: store.MoveArriving, Peer: p.Source, Secret: secretDigest(p.Secret)})
	})
	if err != nil {
		return prep, err
	}
	manifests := r.fetchOwnToolsets(ctx)
	prep.Toolsets = map[string]string{}
	for _, m := range manifests {
		if ts, err := rap.ParseToolset(m.Manifest); err == nil {
			prep.Toolsets[ts.Name] = m.BaseURL
		}
	}
	base := r.cfg.PublicURL
	prep.Commit = base + movePathFor(p.Session, p.ID, "commit")
	prep.Abort = base + movePathFor(p.Session, p.ID, "abort")
	prep.Status = base + movePathFor(p.Session, p.ID, "status")
	r.log.Info("session arriving", "session", p.Session, "from", redact(p.Source), "toolsets", len(prep.Toolsets))
	return prep, nil
}

// fetchOwnToolsets fetches the toolset document of every configured tool
// server; one that fails is left out.
func (r *Runtime) fetchOwnToolsets(ctx context.Context) []store.CachedToolset {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	out := make([]store.CachedToolset, len(r.cfg.ToolServers))
	var wg sync.WaitGroup
	for i, base := range r.cfg.ToolServers {
		wg.Go(func() {
			_, raw, err := rap.FetchToolset(ctx, r.http, base)
			if err != nil {
				r.log.Warn("toolset discovery for an arriving session failed", "base_url", base, "err", err)
				return
			}
			out[i] = store.CachedToolset{BaseURL: base, Manifest: raw, Fetched: time.Now().UTC()}
		})
	}
	wg.Wait()
	var ok []store.CachedToolset
	for _, c := range out {
		if c.BaseURL != "" {
			ok = append(ok, c)
		}
	}
	return ok
}

// errMoveAuth is a move step whose secret does not match.
var errMoveAuth = fmt.Errorf("%w: this move is unknown here, or its secret does not match", api.ErrNotAllowed)

// inMove reads and authenticates the destination's record of a move.
func inMove(tx store.Tx, root, id, secret string) (store.Move, error) {
	m, err := tx.SessionMove(root, store.MoveIn)
	if errors.Is(err, store.ErrNotFound) {
		return m, errMoveAuth
	}
	if err != nil {
		return m, err
	}
	if m.ID != id || subtle.ConstantTimeCompare([]byte(m.Secret), []byte(secretDigest(secret))) != 1 {
		return m, errMoveAuth
	}
	return m, nil
}

// CommitMove takes the session of a prepared move from its archive (one
// session, rd), in one transaction with the record that it arrived, and
// resumes it here. The session's toolsets become this runtime's own. It
// answers with the callback URLs the source forwards to. Committing a move
// that arrived already answers the same again.
func (r *Runtime) CommitMove(ctx context.Context, root, id, secret string, rd io.Reader) (api.MoveState, error) {
	var st api.MoveState
	ar, err := archive.NewReader(rd)
	if err != nil {
		return st, fmt.Errorf("%w: %w", api.ErrBadInput, err)
	}
	s, err := ar.Next()
	if err != nil {
		return st, fmt.Errorf("%w: %w", api.ErrBadInput, err)
	}
	if _, err := ar.Next(); !errors.Is(err, io.EOF) || s.Root != root {
		return st, fmt.Errorf("%w: a move carries its one session, %s", api.ErrBadInput, root)
	}
	// The status checks follow this runtime's schedule from now.
	for i := range s.CallChecks {
		s.CallChecks[i].Due, s.CallChecks[i].Failures = time.Now().Add(max(r.cfg.CallStatusAfter, 0)), 0
	}
	own := r.fetchOwnToolsets(ctx)
	s.Toolsets, s.Trust = nil, nil
	for _, c := range own {
		s.Toolsets = append(s.Toolsets, archive.Toolset{BaseURL: c.BaseURL, Manifest: c.Manifest, Fetched: c.Fetched})
	}
	already := false
	err = r.store.Update(ctx, func(tx store.Tx) error {
		already = false
		m, err := inMove(tx, root, id, secret)
		if err != nil {
			return err
		}
		switch m.State {
		case store.MoveArrived:
			already = true
			return nil
		case store.MoveAborted:
			return fmt.Errorf("%w: this move was called off", api.ErrConflict)
		}
		if err := r.admitSession(tx, root, true); err != nil {
			return err
		}
		if err := archivestore.WriteSession(tx, s); err != nil {
			return err
		}
		m.State = store.MoveArrived
		return tx.PutMove(m)
	})
	switch {
	case errors.Is(err, archivestore.ErrExists):
		return st, fmt.Errorf("%w: %w", api.ErrConflict, err)
	case errors.Is(err, archive.ErrInvalid):
		return st, fmt.Errorf("%w: %w", api.ErrBadInput, err)
	case err != nil:
		return st, err
	}
	if !already {
		r.mu.Lock()
		delete(r.catalogs, root)
		r.mu.Unlock()
		r.resumeImported(s)
		r.observeMove(MoveDirectionIn, true, "")
		r.log.Info("session arrived", "audit", true, "session", root, "threads", len(s.Threads))
	}
	return r.moveState(ctx, root, id, secret)
}

// AbortMove calls off a prepared move that has not committed; one that
// committed cannot be called off (api.ErrConflict).
func (r *Runtime) AbortMove(ctx context.Context, root, id, secret string) (api.MoveState, error) {
	var st api.MoveState
	err := r.store.Update(ctx, func(tx store.Tx) error {
		m, err := inMove(tx, root, id, secret)
		if err != nil {
			return err
		}
		switch m.State {
		case store.MoveArrived:
			return fmt.Errorf("%w: the session arrived here already", api.ErrConflict)
		case store.MoveArriving:
			m.State = store.MoveAborted
			return tx.PutMove(m)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	r.observeMove(MoveDirectionIn, false, MoveAborted)
	return api.MoveState{State: string(store.MoveAborted)}, nil
}

// MoveStatus answers the source how its move stands here: arriving,
// arrived (with the forwarding table) or aborted.
func (r *Runtime) MoveStatus(ctx context.Context, root, id, secret string) (api.MoveState, error) {
	return r.moveState(ctx, root, id, secret)
}

func (r *Runtime) moveState(ctx context.Context, root, id, secret string) (api.MoveState, error) {
	var st api.MoveState
	err := r.store.View(ctx, func(tx store.Tx) error {
		m, err := inMove(tx, root, id, secret)
		if err != nil {
			return err
		}
		st.State = string(m.State)
		if m.State != store.MoveArrived {
			return nil
		}
		threads, err := tx.SessionThreads(root)
		if err != nil {
			return err
		}
		for _, th := range threads {
			calls, err := tx.ThreadCalls(th.ID)
			if err != nil {
				return err
			}
			subs, err := tx.ThreadSubscriptions(th.ID)
			if err != nil {
				return err
			}
			active := map[string]bool{}
			for _, sub := range subs {
				if sub.State == store.SubscriptionActive {
					active[sub.CallID] = true
				}
			}
			for _, c := range calls {
				if c.Toolset == builtinToolset || !(c.State.Pending() || active[c.CallID]) {
					continue
				}
				st.Forward = append(st.Forward, api.Forward{Thread: th.ID, CallID: c.CallID, CallbackURL: r.callbackURL(th.ID, c.CallID)})
			}
		}
		return nil
	})
	return st, err
}
