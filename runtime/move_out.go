package runtime

// This file owns moving a session away to another runtime, at the source
// (docs/migration.md): the session is paused (its inputs are still taken
// and kept), the destination prepares, the tool servers whose toolset
// says needsMigration move their state (RAP MI-1, MI-2), the session is
// sent, and once the destination has committed it the source deletes it
// and keeps only a forwarding record. The journal (store.Moves) makes a
// restart at any step either finish the move or undo it (move_recover.go).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/archive/archivestore"
	"github.com/gorap/gorap/runtime/httpapi"
	"github.com/gorap/gorap/runtime/store"
)

// Remote is a runtime sessions may be moved to by name.
type Remote struct {
	// URL is the runtime's base URL.
	URL string
	// Token is its client token.
	Token string
}

// DefaultMoveForwardFor is Config.MoveForwardFor's default: how long a
// runtime keeps forwarding what reaches it for a session that moved away.
const DefaultMoveForwardFor = 30 * 24 * time.Hour

// Timeouts of a move's steps.
const (
	// moveQuietTimeout bounds the wait for the session's running slices
	// and dispatches to end once it is paused.
	moveQuietTimeout = 30 * time.Second
	// movePeerTimeout bounds each request to the destination runtime.
	movePeerTimeout = 60 * time.Second
	// migrateTimeout bounds each tool server's POST /migrate.
	migrateTimeout = 2 * time.Minute
)

// moveData is what a source keeps of a gone session (store.Move.Data).
type moveData struct {
	V       int           `json:"v"`
	Threads []string      `json:"threads"`
	Forward []api.Forward `json:"forward,omitempty"`
}

// MoveSession moves the session whose root thread is root to another
// gorap runtime (req.To: its base URL, or the name of one of
// Config.Remotes), keeping its thread ids, and returns once the
// destination holds it. It fails, leaving the session here as it was
// with whatever arrived meanwhile, when any step before the destination's
// commit fails: a tool server's /migrate, the destination's refusal, the
// network. Only a Caller not bound to one user may move sessions.
func (r *Runtime) MoveSession(ctx context.Context, root string, req api.MoveRequest) (api.MoveResponse, error) {
	var resp api.MoveResponse
	if _, scoped := api.ScopedUser(ctx); scoped {
		return resp, api.ErrNotAllowed
	}
	to, token, err := r.resolveRemote(req)
	if err != nil {
		return resp, err
	}
	storeID := ""
	if sh, ok := r.cfg.Store.(store.Shared); ok {
		if sh.SharedByProcesses() {
			return resp, fmt.Errorf("%w: moving a session out of a store several processes share is not supported yet; stop the processes and use rap export and rap import", api.ErrConflict)
		}
		storeID = sh.StoreID()
	}
	mv, err := r.beginMove(ctx, root, to)
	if err != nil {
		return resp, err
	}
	committed := false
	defer func() { r.observeMove(MoveDirectionOut, committed, MoveFailed) }()
	defer func() {
		if !committed && mv.state == store.MoveLeaving {
			r.undoMove(context.WithoutCancel(ctx), mv, "the move failed")
		}
	}()
	if err := r.waitQuiet(ctx, mv.threads); err != nil {
		return resp, fmt.Errorf("%w: %w", errMoveFailed, err)
	}
	toolsets, err := r.sessionToolsets(ctx, root)
	if err != nil {
		return resp, err
	}
	var names []string
	for _, ts := range toolsets {
		names = append(names, ts.name)
	}
	prep, err := r.prepareAt(ctx, to, token, api.MovePrepare{Version: 1, ID: mv.id, Secret: mv.secret, Session: root,
		Source: r.cfg.PublicURL, StoreID: storeID, Toolsets: names})
	if err != nil {
		return resp, err
	}
	mv.prep = prep
	migrated, err := r.migrateTools(ctx, root, toolsets, prep.Toolsets)
	if err != nil {
		return resp, err
	}
	state, err := r.sendSession(ctx, mv)
	if err != nil {
		return resp, err
	}
	committed = true
	if err := r.finishMove(ctx, mv, state.Forward); err != nil {
		return resp, err
	}
	r.closeMovedAt(root, mv.threads, toolsets)
	r.log.Info("session moved", "audit", true, "session", root, "to", redact(to), "threads", len(mv.threads), "migrated", migrated)
	return api.MoveResponse{Session: root, MovedTo: to, Threads: len(mv.threads), Migrated: migrated}, nil
}

// outMove is a move under way at the source.
type outMove struct {
	root, id, secret, to string
	threads              []string
	state                store.MoveState
	prep                 api.MovePrepared
}

// resolveRemote returns the destination's base URL and token.
func (r *Runtime) resolveRemote(req api.MoveRequest) (to, token string, err error) {
	to, token = strings.TrimSpace(req.To), req.Token
	if rm, ok := r.cfg.Remotes[to]; ok {
		to = rm.URL
		if token == "" {
			token = rm.Token
		}
	}
	if !strings.HasPrefix(to, "http://") && !strings.HasPrefix(to, "https://") {
		names := make([]string, 0, len(r.cfg.Remotes))
		for n := range r.cfg.Remotes {
			names = append(names, n)
		}
		slices.Sort(names)
		hint := "no remotes are configured"
		if len(names) > 0 {
			hint = "the configured remotes are " + strings.Join(names, ", ")
		}
		return "", "", fmt.Errorf("%w: move to %q: give the destination runtime's URL (http:// or https://) or the name of a remote (%s)", api.ErrBadInput, req.To, hint)
	}
	to = strings.TrimRight(to, "/")
	if to == strings.TrimRight(r.cfg.PublicURL, "/") {
		return "", "", fmt.Errorf("%w: %s is this runtime; name another one", api.ErrBadInput, to)
	}
	return to, token, nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// beginMove journals the move and pauses the session: from here its
// inputs are kept and no slice of it starts.
func (r *Runtime) beginMove(ctx context.Context, root, to string) (*outMove, error) {
	mv := &outMove{root: root, id: randomHex(12), secret: randomHex(32), to: to, state: store.MoveLeaving}
	err := r.store.Update(ctx, func(tx store.Tx) error {
		th, err := visibleThread(ctx, tx, root)
		if err != nil {
			return err
		}
		if th.ParentID != "" {
			return fmt.Errorf("%w: thread %s is a child thread of session %s; move the session", api.ErrBadInput, root, th.RootID)
		}
		if m, err := tx.SessionMove(root, store.MoveOut); err == nil && m.State != store.MoveGone {
			return fmt.Errorf("%w: session %s is already moving to %s", api.ErrConflict, root, m.Peer)
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		threads, err := tx.SessionThreads(root)
		if err != nil {
			return err
		}
		mv.threads = mv.threads[:0]
		for _, t := range threads {
			mv.threads = append(mv.threads, t.ID)
		}
		return tx.PutMove(store.Move{RootID: root, Direction: store.MoveOut, ID: mv.id, State: store.MoveLeaving, Peer: to, Secret: mv.secret})
	})
	if err != nil {
		return nil, err
	}
	r.moves.set(&moveEntry{root: root, id: mv.id, state: store.MoveLeaving, to: to, threads: mv.threads})
	r.log.Info("session moving", "session", root, "to", redact(to), "threads", len(mv.threads))
	return mv, nil
}

// waitQuiet waits until no slice or dispatch of the threads runs.
func (r *Runtime) waitQuiet(ctx context.Context, threads []string) error {
	deadline := time.Now().Add(moveQuietTimeout)
	for {
		r.mu.Lock()
		busy := ""
		for _, t := range threads {
			if r.threads[t] != nil || r.inflight[t] > 0 {
				busy = t
				break
			}
		}
		r.mu.Unlock()
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("thread %s is still working after %v; try the move again when it is idle", busy, moveQuietTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// movingToolset is one toolset a session uses.
type movingToolset struct {
	name, base     string
	needsMigration bool
}

// sessionToolsets returns the toolsets of the session's cached manifests.
func (r *Runtime) sessionToolsets(ctx context.Context, root string) ([]movingToolset, error) {
	var cached []store.CachedToolset
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		cached, err = tx.SessionToolsets(root)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []movingToolset
	for _, c := range cached {
		ts, err := rap.ParseToolset(c.Manifest)
		if err != nil {
			continue // refused at discovery too: the session never used it
		}
		out = append(out, movingToolset{name: ts.Name, base: c.BaseURL, needsMigration: ts.NeedsMigration})
	}
	return out, nil
}

// peerRequest sends one request of the move protocol and decodes a 200
// answer into out.
func (r *Runtime) peerRequest(ctx context.Context, method, url, token, contentType string, body io.Reader, out any) error {
	ctx, cancel := context.WithTimeout(ctx, movePeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		bearer.Set(req.Header, token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return fmt.Errorf("the destination runtime could not be reached: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorResponse
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		return &peerError{status: resp.StatusCode, msg: msg}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("the destination's answer is not what a gorap runtime sends: %w", err)
		}
	}
	return nil
}

// peerError is an answer of the destination other than 200.
type peerError struct {
	status int
	msg    string
}

func (e *peerError) Error() string {
	switch e.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("the destination refused the token (%d): give its client token (the RAP_TOKEN it was started with): %s", e.status, e.msg)
	case http.StatusNotFound:
		return fmt.Sprintf("the destination does not take sessions (%d %s); is it a gorap runtime of this version or later?", e.status, e.msg)
	}
	return fmt.Sprintf("the destination refused (%d): %s", e.status, e.msg)
}

// prepareAt asks the destination to get ready.
func (r *Runtime) prepareAt(ctx context.Context, to, token string, p api.MovePrepare) (api.MovePrepared, error) {
	var prep api.MovePrepared
	b, _ := json.Marshal(p)
	if err := r.peerRequest(ctx, http.MethodPost, to+"/v1/migrations", token, "application/json", bytes.NewReader(b), &prep); err != nil {
		return prep, fmt.Errorf("%w: prepare the move at %s: %w", errMoveFailed, redact(to), err)
	}
	return prep, nil
}

// errMoveFailed is api.ErrMoveFailed.
var errMoveFailed = api.ErrMoveFailed

// migrateTools calls POST /migrate on every tool server of the session
// whose toolset says needsMigration (RAP MI-1, MI-2), concurrently, with
// the destination's server of the same toolset as destination_url, and
// waits for all. A toolset the destination lacks fails the move before
// any server is asked. Servers that do not need migration are never
// asked.
func (r *Runtime) migrateTools(ctx context.Context, root string, toolsets []movingToolset, dest map[string]string) ([]string, error) {
	var todo []movingToolset
	for _, ts := range toolsets {
		if !ts.needsMigration {
			continue
		}
		if dest[ts.name] == "" {
			return nil, fmt.Errorf("%w: toolset %s keeps state that must move with the session (needsMigration), and the destination has no tool server of that toolset; configure one there", errMoveFailed, ts.name)
		}
		todo = append(todo, ts)
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, ts := range todo {
		wg.Go(func() {
			body, _ := json.Marshal(rap.MigrateRequest{SessionID: root, DestinationURL: dest[ts.name]})
			url := strings.TrimRight(ts.base, "/") + rap.MigratePath
			status, answer, err := r.postAnswer(ctx, url, body, r.migrateTimeout())
			r.log.Info("rap migrate", "audit", true, "session", root, "toolset", ts.name, "server", redact(ts.base), "status", status, "error", errString(err))
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("toolset %s: POST /migrate to %s: %w", ts.name, redact(ts.base), err)
			case status != http.StatusOK:
				errs[i] = fmt.Errorf("toolset %s: its server answered /migrate with %d: %s", ts.name, status, shortAnswer(answer))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", errMoveFailed, err)
	}
	var names []string
	for _, ts := range todo {
		names = append(names, ts.name)
	}
	return names, nil
}

// migrateTimeout bounds each /migrate; tests shorten it.
func (r *Runtime) migrateTimeout() time.Duration {
	if d := r.testMigrateTimeout.Load(); d > 0 {
		return time.Duration(d)
	}
	return migrateTimeout
}

// postAnswer POSTs body as JSON to url and returns the status and the
// start of the answer's body.
func (r *Runtime) postAnswer(ctx context.Context, url string, body []byte, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, b, nil
}

// shortAnswer renders a tool server's answer body for a message.
func shortAnswer(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		s = "(no message)"
	}
	return s
}

// sendSession freezes the session (its inputs wait from now), takes its
// records and sends them to the destination. It returns the destination's
// state once it committed. When the outcome is unknown (the answer was
// lost) the session stays frozen and the recovery asks again.
func (r *Runtime) sendSession(ctx context.Context, mv *outMove) (api.MoveState, error) {
	var state api.MoveState
	var s *archive.Session
	// From here the session's inputs wait (503). Every input that saw the
	// session still paused, and was taken, has committed once the gate
	// is passed: the records read next hold them all.
	r.moves.gate.Lock()
	mv.state = store.MoveSending
	r.moves.set(&moveEntry{root: mv.root, id: mv.id, state: store.MoveSending, to: mv.to, threads: mv.threads})
	r.moves.gate.Unlock()
	err := r.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if s, err = archivestore.ReadSession(tx, mv.root); err != nil {
			return err
		}
		return tx.PutMove(store.Move{RootID: mv.root, Direction: store.MoveOut, ID: mv.id, State: store.MoveSending, Peer: mv.to, Secret: mv.secret})
	})
	if err != nil {
		// Nothing was sent: the session resumes here.
		mv.state = store.MoveLeaving
		return state, fmt.Errorf("%w: read the session: %w", errMoveFailed, err)
	}
	var buf bytes.Buffer
	w, _ := archive.NewWriter(&buf, generator())
	if err := w.WriteSession(s); err != nil {
		return state, err
	}
	if err := w.Close(); err != nil {
		return state, err
	}
	commitErr := r.peerRequest(ctx, http.MethodPost, mv.to+movePathFor(mv.root, mv.id, "commit"), mv.secret, "application/jsonl", &buf, &state)
	if commitErr == nil && state.State == "arrived" {
		return state, nil
	}
	// The destination refused, failed or did not answer: it may still
	// commit (a commit can be late). Settle it: only a destination that
	// says it called the move off lets the session resume here.
	st, settled, err := r.settleSent(ctx, mv)
	switch {
	case settled && st.State == "arrived":
		return st, nil
	case settled:
		return state, fmt.Errorf("%w: %w", errMoveFailed, commitErr)
	}
	r.resolveLater(mv)
	return state, fmt.Errorf("%w: the session was sent to %s, which did not say whether it took it (%v, then %v); the session waits here, frozen, until that runtime answers, and the move then ends one way or the other on its own", api.ErrMoveUndecided, redact(mv.to), commitErr, err)
}

// settleSent decides a move whose session was sent: the destination has
// it (the state "arrived" is returned, and the caller finishes the move),
// or the destination confirms that it called the move off (the session
// resumes here). Anything else leaves it unsettled (false): the session
// stays frozen, never active in two places.
func (r *Runtime) settleSent(ctx context.Context, mv *outMove) (api.MoveState, bool, error) {
	st, err := r.askMove(ctx, mv)
	if err != nil {
		return st, false, err
	}
	if st.State == "arrived" {
		return st, true, nil
	}
	var ab api.MoveState
	err = r.peerRequest(ctx, http.MethodPost, mv.to+movePathFor(mv.root, mv.id, "abort"), mv.secret, "application/json", strings.NewReader("{}"), &ab)
	if err == nil && ab.State == "aborted" {
		r.undoMove(context.WithoutCancel(ctx), mv, "the destination did not commit it, and called it off")
		return ab, true, nil
	}
	var pe *peerError
	if errors.As(err, &pe) && pe.status == http.StatusConflict {
		// It committed between the status and the abort.
		if st, err := r.askMove(ctx, mv); err == nil && st.State == "arrived" {
			return st, true, nil
		}
	}
	return st, false, err
}

// movePathFor returns the path of a step of a move at the destination.
func movePathFor(root, id, step string) string {
	return httpapi.MovePath + root + "/" + id + "/" + step
}

// askMove asks the destination how the move stands.
func (r *Runtime) askMove(ctx context.Context, mv *outMove) (api.MoveState, error) {
	var st api.MoveState
	err := r.peerRequest(ctx, http.MethodPost, mv.to+movePathFor(mv.root, mv.id, "status"), mv.secret, "application/json", strings.NewReader("{}"), &st)
	return st, err
}

// undoMove ends a move whose session was never committed at the
// destination: for one that was not sent, the destination is told to drop
// the move (best effort: it holds nothing of the session), the journal
// entry goes, and the session resumes here with what arrived meanwhile.
// A sent session is undone only through settleSent.
func (r *Runtime) undoMove(ctx context.Context, mv *outMove, why string) {
	if mv.state != store.MoveSending {
		_ = r.peerRequest(ctx, http.MethodPost, mv.to+movePathFor(mv.root, mv.id, "abort"), mv.secret, "application/json", strings.NewReader("{}"), nil)
	}
	err := r.store.Update(ctx, func(tx store.Tx) error { return tx.DeleteMove(mv.root, store.MoveOut) })
	if err != nil {
		r.log.Error("undo a move: the journal entry stays; the next start undoes it", "session", mv.root, "err", err)
	}
	mv.state = ""
	r.moves.drop(mv.root)
	r.log.Warn("session move undone: the session stays here", "session", mv.root, "to", redact(mv.to), "reason", why)
	r.resumeThreads(ctx, mv.threads)
}

// resumeThreads wakes the threads that got input while they were paused.
func (r *Runtime) resumeThreads(ctx context.Context, threads []string) {
	var queued []string
	_ = r.store.View(ctx, func(tx store.Tx) error {
		var err error
		queued, err = tx.QueuedThreads()
		return err
	})
	for _, q := range queued {
		if slices.Contains(threads, q) {
			r.wake(q)
		}
	}
}

// finishMove deletes the session here and keeps its forwarding record.
func (r *Runtime) finishMove(ctx context.Context, mv *outMove, forward []api.Forward) error {
	data, _ := json.Marshal(moveData{V: 1, Threads: mv.threads, Forward: forward})
	keep := r.cfg.MoveForwardFor
	if keep <= 0 {
		keep = DefaultMoveForwardFor
	}
	err := r.store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		if _, err := tx.DeleteSession(mv.root); err != nil {
			return err
		}
		return tx.PutMove(store.Move{RootID: mv.root, Direction: store.MoveOut, ID: mv.id, State: store.MoveGone, Peer: mv.to,
			Secret: mv.secret, Data: data, Expires: time.Now().Add(keep)})
	})
	if err != nil {
		// The destination holds the session; this runtime stays frozen
		// for it and finishes at its next start.
		return fmt.Errorf("the destination took the session, but recording that here failed (%w); restart this runtime to finish", err)
	}
	mv.state = store.MoveGone
	e := goneEntry(mv.root, mv.id, mv.to, mv.threads, forward)
	e.expires = time.Now().Add(keep)
	r.moves.set(e)
	r.forgetThreadsSaying(mv.root, mv.threads, sessionMovedMessage)
	return nil
}

// goneEntry is the in-memory entry of a gone session.
func goneEntry(root, id, to string, threads []string, forward []api.Forward) *moveEntry {
	e := &moveEntry{root: root, id: id, state: store.MoveGone, to: to, threads: threads, forward: map[moveCall]string{}}
	for _, f := range forward {
		e.forward[moveCall{f.Thread, f.CallID}] = f.CallbackURL
	}
	return e
}

// closeMovedAt tells the tool servers whose state moved that the
// session's threads are closed here (RAP TC-1 allows it): only those, so
// that a server that may still owe a result keeps the call.
func (r *Runtime) closeMovedAt(root string, threads []string, toolsets []movingToolset) {
	for _, ts := range toolsets {
		if !ts.needsMigration {
			continue
		}
		for _, t := range threads {
			body, _ := json.Marshal(rap.CloseThreadRequest{ThreadID: t})
			base := ts.base
			ok := r.goTracked(func() {
				status, _, err := r.postOnce(r.baseCtx, strings.TrimRight(base, "/")+rap.CloseThreadPath, body, notifyTimeout)
				r.log.Info("rap notification", "audit", true, "path", rap.CloseThreadPath, "server", redact(base), "session", root, "status", status, "error", errString(err))
			})
			if !ok {
				return
			}
		}
	}
}
