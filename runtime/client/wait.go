package client

// This file owns the helpers that know when a turn is over: WaitQuiet,
// and SendAndWait, which sends a message and follows the thread until the
// answer, with whatever tools and child threads it took, is complete.

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorap/gorap/runtime/api"
)

// ErrTurnFailed is returned (wrapped, with the runtime's message) by
// WaitQuiet and SendAndWait when the thread settled because a completion
// failed: its inputs stay queued, and the runtime retries them on its own
// or with the next message.
var ErrTurnFailed = errors.New("the thread's last completion failed")

// settledState returns the state ev says the stream's thread is in, and
// whether ev says so: the thread state of a replay, a turn_ended event,
// or the thread's closing.
func settledState(ev Event) (api.ThreadState, bool) {
	switch p := ev.Payload.(type) {
	case *api.ThreadInfo:
		return p.State, true
	case *api.TurnEnded:
		return p.State, true
	case *api.ThreadClosed:
		if p.ThreadID == ev.ThreadID {
			return api.StateClosed, true
		}
	}
	return "", false
}

// WaitQuiet waits until the thread is settled: quiet (nothing queued,
// running or pending in it or its child threads), closed, or failed (then
// the error wraps ErrTurnFailed). It returns the thread's state read
// then. It follows the thread's event stream, reconnecting through a
// restart of the runtime (StreamOptions.RetryFor's default).
func (c *Client) WaitQuiet(ctx context.Context, threadID string) (*api.ThreadInfo, error) {
	s, err := c.Events(ctx, threadID, StreamOptions{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return c.followUntilSettled(ctx, s, nil)
}

// SendAndWait sends text to the thread and follows it until the message
// is answered and the thread settled (see WaitQuiet): every event after
// the replay of the thread's state is passed to on, when not nil, in
// order (the message itself, text deltas, tool calls and results, the
// reply). It returns the thread's state read at the end.
func (c *Client) SendAndWait(ctx context.Context, threadID, text string, on func(Event)) (*api.ThreadInfo, error) {
	s, err := c.Events(ctx, threadID, StreamOptions{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			return nil, err
		}
		if ev.Type == api.EventReplayDone {
			break
		}
	}
	if _, err := c.PostMessage(ctx, threadID, text); err != nil {
		return nil, err
	}
	// The thread may have been quiet before: a settled state counts once
	// the message was taken (announced, with what answers it after).
	taken := false
	return c.followUntilSettled(ctx, s, func(ev Event) bool {
		if m, ok := ev.Payload.(*api.Message); ok && m.Role == api.RoleUser && m.Text == text && m.ThreadID == threadID {
			taken = true
		}
		if on != nil {
			on(ev)
		}
		return taken
	})
}

// followUntilSettled reads s until an event says its thread is settled.
// each, when set, sees every event and says whether a settled state
// counts yet. The last error event's message goes with ErrTurnFailed.
func (c *Client) followUntilSettled(ctx context.Context, s *Stream, each func(Event) bool) (*api.ThreadInfo, error) {
	lastError := ""
	for {
		ev, err := s.Next()
		if err != nil {
			return nil, err
		}
		counts := true
		if each != nil {
			counts = each(ev)
		}
		if e, ok := ev.Payload.(*api.Error); ok {
			lastError = e.Message
		}
		state, ok := settledState(ev)
		if !ok || !counts || !state.Settled() {
			continue
		}
		info, err := c.Thread(ctx, s.threadID)
		if err != nil {
			return nil, err
		}
		if !info.State.Settled() {
			continue // it woke again since the event
		}
		if info.State == api.StateFailed {
			if lastError == "" {
				lastError = "see the thread's error events"
			}
			return info, fmt.Errorf("thread %s: %w: %s", s.threadID, ErrTurnFailed, lastError)
		}
		return info, nil
	}
}
