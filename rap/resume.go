package rap

// Resumable calls: a handler that saves a state with Call.SaveState is run
// again by the next Start when its process stops before the call's result
// is stored, instead of the call being answered with an error result.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// savedCall is what SaveState stores in the call journal: what Start needs
// to run the handler again.
type savedCall struct {
	Invocation Invocation      `json:"invocation"`
	BaseURL    string          `json:"base_url,omitempty"`
	State      json.RawMessage `json:"state"`
}

// SaveState makes the call resumable. It stores state, encoded as JSON,
// with the call in the server's call journal, together with the
// invocation (arguments included). If the process stops before the call's
// result is stored (it crashes, or Shutdown cancels the handler with
// ErrServerShutdown and it returns an error), the next Start runs the
// tool's handler again for the call, on a worker, with Resumed true and
// State returning the state last saved; the runtime is not told of the
// restart and gets the call's one result as usual. A call resumes only
// while no result is stored for it (the journal forgets the call in the
// transaction that stores its result), so it never gets two.
//
// Save a state at each point the handler can go on from, such as "request
// sent to the remote service" or "waiting for the user to sign in", and
// write the handler to pick up from each: work it cannot know the outcome
// of (a request that may or may not have reached a service that does not
// deduplicate) should end in an error result that says so.
//
// Each SaveState waits for a write to disk. It does nothing and returns
// nil when the call is not journaled: the server has no Store with a
// CallStateJournal (rap/durable has one), ServerOptions.NoCallJournal is
// set, or the call was run by Invoke. It returns an error when the state
// cannot be encoded or stored, or encodes to more than MaxCallStateBytes;
// the call then goes on, resumed from the state saved before, if any.
func (c *Call) SaveState(ctx context.Context, state any) error {
	j, ok := c.srv.journal.(CallStateJournal)
	if !ok || !c.journaled || c.result != nil {
		return nil
	}
	if c.sent.Load() {
		return c.afterResult("SaveState")
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("rap: SaveState for call %s: encoding the state: %w", c.Invocation.ID, err)
	}
	rec, err := json.Marshal(savedCall{Invocation: *c.Invocation, BaseURL: c.baseURL, State: raw})
	if err != nil {
		return fmt.Errorf("rap: SaveState for call %s: %w", c.Invocation.ID, err)
	}
	if len(rec) > MaxCallStateBytes {
		return fmt.Errorf("rap: SaveState for call %s: the state with the invocation is %d bytes, over the %d-byte limit (rap.MaxCallStateBytes); save less", c.Invocation.ID, len(rec), MaxCallStateBytes)
	}
	inv := c.Invocation
	if err := j.SaveCallState(ctx, inv.GroupID, inv.ID, rec); err != nil {
		return fmt.Errorf("rap: SaveState for call %s: %w", inv.ID, err)
	}
	c.saved.Store(true)
	return nil
}

// Resumed reports whether the call was resumed by Start after the process
// that accepted it stopped (see SaveState).
func (c *Call) Resumed() bool { return c.resumed }

// State returns the state SaveState last saved before the process
// stopped, when the call was resumed (Resumed); nil otherwise.
func (c *Call) State() json.RawMessage { return c.state }

// leftToResume reports whether the call ends without a result, to be
// resumed by the next Start: it saved a state and its handler returned an
// error because the server is shutting down.
func (c *Call) leftToResume(err, cause error) bool {
	return err != nil && c.saved.Load() && c.srv.opts.Store != nil && errors.Is(cause, ErrServerShutdown)
}

// resumeCall runs the handler of a journaled call again with the state it
// saved. It reports false when the call cannot be resumed (its record does
// not decode, its tool is gone, no worker slot is free); Start then
// answers it with an error result.
func (s *Server) resumeCall(r CallRecord) bool {
	var sc savedCall
	if err := json.Unmarshal(r.State, &sc); err != nil || sc.Invocation.GroupID != r.GroupID || sc.Invocation.ID != r.ID {
		s.log.Error("rap: the saved state of an interrupted call does not decode; answering it with an error result", "toolset", s.name,
			"operation", r.Operation, "group_id", r.GroupID, "id", r.ID)
		return false
	}
	inv := sc.Invocation
	inv.CallbackURL = r.CallbackURL
	if e, ok := s.lookup(inv.Operation); !ok || e.prepare != nil {
		s.log.Warn("rap: an interrupted call's tool is gone; answering it with an error result", "toolset", s.name,
			"operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID)
		return false
	}
	if !s.pool.reserve() {
		s.log.Warn("rap: no worker slot to resume an interrupted call; answering it with an error result", "toolset", s.name,
			"operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID)
		return false
	}
	ctx, cancel := context.WithCancelCause(s.baseCtx)
	if !s.register(inv.GroupID, inv.ID, cancel) {
		// Already resumed, by a Start that failed later and is called
		// again: that run sends the result.
		s.pool.release()
		cancel(nil)
		return true
	}
	base := s.opts.PublicURL
	if base == "" {
		base = sc.BaseURL
	}
	c := &Call{Invocation: &inv, srv: s, baseURL: base, journaled: true, resumed: true, state: sc.State,
		trace: traceContext{r.TraceParent, r.TraceState}}
	c.saved.Store(true)
	s.attach(inv.GroupID, inv.ID, c)
	s.log.Info("rap: resuming a call that was running when the tool server stopped", "toolset", s.name,
		"operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID)
	s.pool.submit(job{s: s, ctx: ctx, cancel: cancel, c: c})
	return true
}
