package termchat

// This file owns moving the chat's session to another runtime (the /move
// command) and what the chat says when the runtime answers that the
// session moved away (client.ErrMoved).

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// sessionMover is an API that moves sessions to another runtime;
// NewHTTPAPI's does.
type sessionMover interface {
	// MoveSession moves the session whose root thread is threadID.
	MoveSession(ctx context.Context, threadID string, req api.MoveRequest) (*api.MoveResponse, error)
}

// MoveSession implements sessionMover.
func (a clientAPI) MoveSession(ctx context.Context, threadID string, req api.MoveRequest) (*api.MoveResponse, error) {
	return a.c.MoveSession(ctx, threadID, req)
}

// moveUsage says how /move is used.
const moveUsage = "/move URL_OR_REMOTE [TOKEN] moves this session to another runtime: its URL, or the name of a remote this runtime knows; TOKEN is that runtime's client token, needed unless this runtime knows it"

// move runs "/move TARGET [TOKEN]": it moves the session to the runtime
// TARGET names. Once the destination holds the session the chat says how
// to go on there and ends (errQuit: exit status 0). A move that failed
// leaves the session here; the chat says why and goes on.
func (s *session) move(ctx context.Context, args []string) error {
	stdout, stderr := s.opts.Stdout, s.opts.Stderr
	if len(args) == 0 || len(args) > 2 {
		s.say(stderr, "rap chat: %s\n", moveUsage)
		return nil
	}
	m, ok := s.api.(sessionMover)
	if !ok {
		s.say(stderr, "rap chat: /move: this client cannot move sessions\n")
		return nil
	}
	req := api.MoveRequest{To: args[0]}
	if len(args) == 2 {
		req.Token = args[1]
	}
	s.say(stdout, "  · moving session %s to %s; this waits for the tool servers that keep state for this session…\n", s.threadID, oneLine(clean(req.To), 200))
	// The runtime ends the session's event streams with an error event
	// saying it moved: shown only if the move fails.
	s.f.holdErrors(true)
	resp, err := m.MoveSession(ctx, s.threadID, req)
	if err != nil {
		s.f.holdErrors(false)
		if _, moved := client.MovedTo(err); moved {
			return s.movedFailure(err)
		}
		if ctx.Err() != nil {
			return nil
		}
		if StatusOf(err) == http.StatusUnauthorized {
			return failure("/move: %w", err)
		}
		s.refusals++
		s.say(stderr, "rap chat: /move: %s\n", moveFailed(err))
		return nil
	}
	s.say(stdout, "moved to %s; continue there: rap chat --server %s --thread %s\n", resp.MovedTo, resp.MovedTo, s.threadID)
	return errQuit
}

// moveFailed words a failed move: the runtime's reason, and that the
// session stays.
func moveFailed(err error) string {
	msg := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) && ce.Message != "" && ce.Status != http.StatusForbidden {
		msg = ce.Message
	}
	if !strings.Contains(msg, "stays here") {
		msg += "; the session stays here"
	}
	return msg
}

// movedFailure is the chat's end when the runtime answers that the session
// moved to another runtime: where, and the command that goes on there.
func (s *session) movedFailure(err error) error {
	return movedFailure(err, s.threadID)
}

// movedFailure turns an error wrapping client.ErrMoved into a failure that
// says where the session of threadID went and how to continue there;
// other errors are returned as they are.
func movedFailure(err error, threadID string) error {
	to, moved := client.MovedTo(err)
	if !moved {
		return err
	}
	base := to
	if i := strings.Index(base, "/v1/threads/"); i >= 0 {
		base = base[:i]
	}
	if base == "" {
		return failure("this session moved to another runtime, which the runtime did not name: %w", err)
	}
	return failure("this session moved to %s; continue there with: rap chat --server %s --thread %s (and that runtime's token)", base, base, threadID)
}

// historyEntry is what the line editor's history keeps of a line: a
// /move command without its token.
func historyEntry(line string) string {
	f := strings.Fields(line)
	if len(f) > 2 && f[0] == "/move" {
		return f[0] + " " + f[1]
	}
	return line
}

// holdErrors, on, keeps the error events of every followed thread instead
// of showing them; off shows those kept.
func (f *follower) holdErrors(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding = on
	if on {
		return
	}
	for _, h := range f.held {
		h.t.tr.event(h.ev)
	}
	f.held = nil
}

// heldEvent is an event holdErrors kept, with its thread.
type heldEvent struct {
	t  *followedThread
	ev Event
}
