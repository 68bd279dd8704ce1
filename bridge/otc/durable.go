package otc

// Durable calls. With a Store that keeps a call journal (rap/durable, as
// rap.ServerOptions.Store), the RAP server records every accepted call
// before acknowledging it, and the bridge saves where each call stands
// (rap.Call.SaveState): before it sends the call to the worker, and while
// it waits for an authorization. When the bridge stops before a call's
// result is stored (it is killed, or shut down), the next start resumes
// the call from there; the journal forgets a call in the transaction that
// stores its result, so no call is answered twice. See docs/otc.md,
// "Durability".

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/gorap/gorap/rap"
)

// Phases of a call, as saved in the journal.
const (
	// phaseCall: a request to the worker's call route may be in flight,
	// or its answer is not acted on yet.
	phaseCall = "call"
	// phaseAuth: the user was shown an authorization link and the bridge
	// waits for the authorization; no call request is in flight.
	phaseAuth = "auth"
)

// callState is what the bridge saves with a call. Secrets and tokens are
// never saved: a resumed call reads its secrets again, and learns an OXP
// authorization's token from its check_url again.
type callState struct {
	Phase string `json:"phase"`
	// Auth is the authorization waited for (phaseAuth; phaseCall while an
	// Arcade call is repeated to learn whether it is done).
	Auth *savedChallenge `json:"auth,omitempty"`
	// AuthDeadline ends the wait for the authorization.
	AuthDeadline time.Time `json:"auth_deadline,omitzero"`
}

// savedChallenge is the part of an AuthChallenge a resumed wait needs: not
// the link, which the user was shown already.
type savedChallenge struct {
	ID       string `json:"id,omitempty"`
	CheckURL string `json:"check_url,omitempty"`
}

// repeatable reports whether sending a call again is harmless: OXP 1.0
// makes call_id (the RAP call id) the call's idempotency key, so a worker
// that already ran the call answers it without running it again. Arcade's
// worker protocol promises nothing of the kind for execution_id.
func (b *Bridge) repeatable() bool { return b.client.Dialect == DialectOXP }

// startState returns where the call stands: for a new call the call phase,
// saved before the worker is called; for a call resumed after a restart
// the saved state. A resumed call that may or may not have run on a
// worker that does not deduplicate calls ends with an error result that
// says so.
func (b *Bridge) startState(ctx context.Context, c *rap.Call, log *slog.Logger, m *Mapped) (callState, error) {
	if !c.Resumed() {
		st := callState{Phase: phaseCall}
		b.save(ctx, c, log, st)
		return st, nil
	}
	var st callState
	if err := json.Unmarshal(c.State(), &st); err != nil || (st.Phase != phaseCall && st.Phase != phaseAuth) || (st.Phase == phaseAuth && st.Auth == nil) {
		log.Error("otc: the saved state of an interrupted call does not decode; ending it with an error result")
		return st, fmt.Errorf("Error: the bridge to the tool server restarted while %s was running and could not tell where the call stood, so it may or may not have run. Check before calling it again", m.Tool.Name)
	}
	log.Info("otc: resuming a call interrupted by a restart of the bridge", "phase", st.Phase)
	if st.Phase == phaseCall && !b.repeatable() {
		return st, fmt.Errorf("Error: the bridge to the tool server restarted while %s was being run by the worker, so the call may or may not have run, and this worker does not guarantee that repeating it is harmless. Check whether it took effect before calling it again", m.Tool.Name)
	}
	return st, nil
}

// save saves st with the call. A failure is logged: the call goes on, and
// a restart resumes it from the state saved before, if any.
func (b *Bridge) save(ctx context.Context, c *rap.Call, log *slog.Logger, st callState) {
	if err := c.SaveState(ctx, st); err != nil {
		log.Warn("otc: could not save where the call stands; a restart of the bridge resumes it from an earlier point, or ends it with an error result", "err", err.Error())
	}
}
