package rap

import (
	"context"
	"errors"
	"time"
)

// ErrSubscriptionGone is the cause of a subscription context cancelled
// because the runtime answered one of its events 410 Gone: the runtime has
// ended the subscription (a /cancel_tool_call that never arrived, say), so
// the server stops the handler and forgets the subscription. Read it with
// context.Cause.
var ErrSubscriptionGone = errors.New("rap: the runtime no longer knows this subscription (an event was answered 410 Gone)")

// goneDeleteTimeout bounds forgetting a gone subscription's record.
const goneDeleteTimeout = 10 * time.Second

// subscriptionGone stops and forgets the subscription (groupID, id) after
// the runtime answered one of its events 410 Gone, so a
// lost /cancel_tool_call heals itself. It runs on the delivery goroutine.
func (s *Server) subscriptionGone(groupID, id string) {
	s.mu.Lock()
	a, found := s.active[groupID][id]
	s.mu.Unlock()
	if found {
		a.cancel(ErrSubscriptionGone)
	}
	ctx, cancel := context.WithTimeout(s.baseCtx, goneDeleteTimeout)
	defer cancel()
	if err := s.subs.DeleteSubscription(ctx, groupID, id); err != nil {
		s.log.Error("rap: could not delete a subscription the runtime reported gone; it will resume at the next start",
			"toolset", s.name, "group_id", groupID, "id", id, "error", err)
	}
	s.log.Info("rap: subscription stopped: the runtime answered its event 410 Gone", "toolset", s.name, "group_id", groupID, "id", id, "running", found)
}

// DeadLetters returns up to limit callbacks the server stopped delivering
// (their retries outlived RetryPolicy.GiveUpAfter, or the runtime refused
// them with a final 4xx), oldest first: from the Store when it is a
// DeadLetterStore (rap/durable is; "rap outbox list" reads it too), or
// from memory for a server without a Store (the last
// MaxMemoryDeadLetters).
func (s *Server) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	return s.sender.DeadLetters(ctx, limit)
}
