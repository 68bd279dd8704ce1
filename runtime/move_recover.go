package runtime

// This file owns the end of a move whose runtime stopped in the middle
// (the journal, store.Moves): at start, a session that was leaving is
// undone, one that was sent is finished or undone as the destination
// says (asked again until it answers), and gone sessions are loaded for
// forwarding. It also owns what reaches a moving or gone session: its
// slices wait, its inputs wait while it is sent, and tools' callbacks for
// a gone session are relayed to the destination.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// moveAskEvery is how often a runtime asks a destination that did not say
// whether it took a session.
const moveAskEvery = 5 * time.Second

// recoverMoves reads the journal at start; it runs before the queued
// threads are woken, so that a paused session's threads stay paused.
func (r *Runtime) recoverMoves(ctx context.Context) error {
	var moves []store.Move
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		moves, err = tx.ListMoves()
		return err
	})
	if err != nil {
		return err
	}
	for _, m := range moves {
		if m.Direction != store.MoveOut {
			continue
		}
		switch m.State {
		case store.MoveGone:
			if !m.Expires.IsZero() && time.Now().After(m.Expires) {
				// Its forwarding period is over: requests for the
				// session are now answered as for any unknown one.
				err := r.store.Update(ctx, func(tx store.Tx) error { return tx.DeleteMove(m.RootID, store.MoveOut) })
				if err != nil {
					return err
				}
				r.log.Info("forwarding record of a moved session expired", "session", m.RootID, "moved_to", redact(m.Peer))
				continue
			}
			var d moveData
			if err := json.Unmarshal(m.Data, &d); err != nil {
				r.log.Error("a moved session's forwarding record is unreadable; nothing is forwarded for it", "session", m.RootID, "err", err)
				continue
			}
			e := goneEntry(m.RootID, m.ID, m.Peer, d.Threads, d.Forward)
			e.expires = m.Expires
			r.moves.set(e)
		case store.MoveLeaving, store.MoveSending:
			var threads []string
			err := r.store.View(ctx, func(tx store.Tx) error {
				ths, err := tx.SessionThreads(m.RootID)
				for _, t := range ths {
					threads = append(threads, t.ID)
				}
				return err
			})
			if err != nil {
				return err
			}
			mv := &outMove{root: m.RootID, id: m.ID, secret: m.Secret, to: m.Peer, threads: threads, state: m.State}
			r.moves.set(&moveEntry{root: mv.root, id: mv.id, state: m.State, to: mv.to, threads: threads})
			if m.State == store.MoveLeaving {
				// Nothing was sent: the destination holds nothing to keep.
				r.goTracked(func() { r.undoMove(r.baseCtx, mv, "this runtime stopped during the move") })
				continue
			}
			r.resolveLater(mv)
		}
	}
	return nil
}

// resolveLater asks the destination, until it answers, whether it took a
// session that was sent, and finishes or undoes the move accordingly.
// The session stays frozen meanwhile: it is never active in two places.
func (r *Runtime) resolveLater(mv *outMove) {
	r.goTracked(func() {
		for {
			st, settled, err := r.settleSent(r.baseCtx, mv)
			switch {
			case settled && st.State == "arrived":
				if err := r.finishMove(r.baseCtx, mv, st.Forward); err != nil {
					r.log.Error("finish a move", "session", mv.root, "err", err)
				} else {
					r.log.Info("session moved", "audit", true, "session", mv.root, "to", redact(mv.to), "threads", len(mv.threads))
					return
				}
			case settled:
				return
			default:
				r.log.Warn("a sent session waits for its destination's answer", "session", mv.root, "to", redact(mv.to), "err", err)
			}
			select {
			case <-r.baseCtx.Done():
				return
			case <-time.After(moveAskEvery):
			}
		}
	})
}

// MovedTo returns the base URL of the runtime the session of threadID
// moved to, if it moved away from this one.
func (r *Runtime) MovedTo(threadID string) (string, bool) {
	e := r.moves.of(threadID)
	if e == nil || e.state != store.MoveGone {
		return "", false
	}
	return e.to, true
}

// admitInput admits an input for threadID (a message, a callback, an
// answer to a choice) or refuses it while its session is being sent
// (api.ErrMoving) or gone (*api.MovedError). Call release once the
// input's transaction has committed (or failed).
func (r *Runtime) admitInput(threadID string) (release func(), err error) {
	r.moves.gate.RLock()
	if err := r.checkNotSending(threadID); err != nil {
		r.moves.gate.RUnlock()
		return nil, err
	}
	return r.moves.gate.RUnlock, nil
}

// checkNotSending refuses an input for a session whose records are being
// sent: it would be lost.
func (r *Runtime) checkNotSending(threadID string) error {
	if e := r.moves.of(threadID); e != nil {
		switch e.state {
		case store.MoveSending:
			return api.ErrMoving
		case store.MoveGone:
			return &api.MovedError{Session: e.root, To: e.to}
		}
	}
	return nil
}

// movedCallback answers a callback for a thread of a moving or gone
// session, or returns false when the callback is to be handled as usual
// (the session is paused, and its inputs are kept).
func (r *Runtime) movedCallback(ctx context.Context, threadID, callID string, body io.Reader, key string) (api.CallbackResult, bool) {
	e := r.moves.of(threadID)
	if e == nil || e.state == store.MoveLeaving {
		return api.CallbackResult{}, false
	}
	if e.state == store.MoveSending {
		return api.CallbackResult{Status: http.StatusServiceUnavailable, Message: "the session is moving to another runtime; retry in a moment", RetryAfter: 2}, true
	}
	url, ok := e.forward[moveCall{threadID, callID}]
	if !ok {
		// RAP RE-5: the call was not pending when the session moved.
		return api.CallbackResult{Status: http.StatusNotFound, Message: "no such pending tool call: its session moved to another runtime, and this call had ended; do not send it again"}, true
	}
	data, err := io.ReadAll(io.LimitReader(body, MaxCallbackBytes+1))
	if err != nil || len(data) > MaxCallbackBytes {
		return api.CallbackResult{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("callback body is larger than %d bytes", MaxCallbackBytes)}, true
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return api.CallbackResult{Status: http.StatusInternalServerError, Message: "the forwarding address is unusable"}, true
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		r.log.Warn("callback of a moved session not forwarded: the destination is unreachable", "thread", threadID, "call_id", callID, "to", redact(e.to), "err", err)
		return api.CallbackResult{Status: http.StatusServiceUnavailable, Message: "the session moved to another runtime, which cannot be reached now; retry later", RetryAfter: 10}, true
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	_ = json.Unmarshal(b, &answer)
	msg := answer.Status
	if msg == "" {
		msg = answer.Error
	}
	if msg == "" {
		msg = strings.TrimSpace(string(b))
	}
	r.log.Info("callback forwarded to the session's new runtime", "thread", threadID, "call_id", callID, "to", redact(e.to), "status", resp.StatusCode)
	res := api.CallbackResult{Status: resp.StatusCode, Message: msg}
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
		res.RetryAfter = 5
	}
	return res, true
}
