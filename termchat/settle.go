package termchat

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// settleGoal says what waitSettled waits for.
type settleGoal struct {
	// text is the message posted ("" when none): it must appear more than
	// countBefore times in the history, followed by an assistant message.
	text        string
	countBefore int
	// needIdle requires the thread to go idle more than idlesBefore times
	// (it ran after the post), or a new ask of the user.
	needIdle    bool
	idlesBefore int
	// An error event beyond errsBefore ends the wait (the input stays
	// queued, RAP RT-4).
	errsBefore int
	// allCalls also waits for the thread's pending calls, unless asks has
	// an open ask (a tool waits for the user, who answers on the next
	// line). asksBefore is how many asks asks had seen before.
	allCalls   bool
	asks       *userAsks
	asksBefore int
}

// waitSettled waits, up to wait, until thread threadID reached goal, was
// closed, or reported an error.
func waitSettled(ctx context.Context, a API, w *threadWatch, threadID string, g settleGoal, wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	var last *ThreadStatus
	var down error // the runtime is unreachable since this error
	for {
		ws := w.snapshot()
		if ws.closed || ws.errs > g.errsBefore && !ws.running {
			return nil
		}
		open, added := 0, 0
		if g.asks != nil {
			open, added = g.asks.count()
		}
		ready := !ws.running
		if g.needIdle {
			ready = ws.state == "idle" && ws.idles > g.idlesBefore || open > 0 && added > g.asksBefore && !ws.running
		}
		if ready {
			st, err := a.Status(ctx, threadID)
			switch {
			case unreachable(ctx, err):
				// The runtime restarts: wait for it (the poll below).
				down = err
				st = nil
			case err != nil:
				return err
			default:
				down = nil
			}
			if st != nil {
				last = st
			}
		}
		if ready && last != nil && down == nil {
			st := last
			if st.Status == string(api.ThreadStatusClosed) {
				return nil
			}
			if st.Queued == 0 && (!g.allCalls || len(st.PendingCalls) == 0 || open > 0) {
				// What the status says was saved is shown before the
				// caller goes on.
				w.caughtUp(ctx, st.LastSeq)
				if g.text == "" {
					return nil
				}
				msgs, err := a.History(ctx, threadID)
				switch {
				case unreachable(ctx, err):
					down = err
				case err != nil:
					return err
				case settledIn(msgs, g.text, g.countBefore):
					return nil
				}
			}
		}
		select {
		case <-ws.changed:
		case <-poll.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if down != nil {
				return fmt.Errorf("gave up waiting after %v: the runtime has not been reachable since: %w", wait, down)
			}
			if last != nil && len(last.PendingCalls) > 0 {
				names := make([]string, 0, len(last.PendingCalls))
				for _, c := range last.PendingCalls {
					names = append(names, c.ToolName)
				}
				sort.Strings(names)
				return fmt.Errorf("gave up waiting after %v: %s still pending (%s); their results will appear with 'rap chat --thread %s'", wait, plural(len(names), "tool call"), strings.Join(names, ", "), threadID)
			}
			return fmt.Errorf("gave up waiting after %v for thread %s to go idle; raise --wait", wait, threadID)
		}
	}
}

// settledIn reports whether msgs show the message text processed: it
// appears more than countBefore times and an assistant message follows its
// last occurrence.
func settledIn(msgs []api.Message, text string, countBefore int) bool {
	n, last := 0, -1
	for i, m := range msgs {
		if m.Role == api.RoleUser && m.Text == text {
			n++
			last = i
		}
	}
	if n <= countBefore {
		return false
	}
	for _, m := range msgs[last+1:] {
		if m.Role == api.RoleAssistant {
			return true
		}
	}
	return false
}
