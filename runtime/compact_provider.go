package runtime

// This file owns compaction by the model's provider: a model whose API
// compacts a conversation itself (model.ServerCompactor, Anthropic's
// server-side compaction) is asked to, at the share of the window gorap's
// own compaction would start at (CompactionConfig.Mode). The block the API
// answers with is stored with the turn that carried it, as a compaction
// of the thread up to the last message of the request (store.Compaction
// with its Block), and every later request sends that block, byte for
// byte, followed by the messages after it. gorap's own compaction does not
// run for such a thread; compacting on demand (CompactThread) still
// summarises with gorap's.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/store"
)

// CompactionMode chooses whose compaction keeps threads within their
// model's context window.
type CompactionMode string

// Compaction modes.
const (
	// CompactionAuto, the zero value, uses the provider's own compaction
	// where the model has one (model.ServerCompactor: Anthropic's
	// claude-opus-4-6 and claude-sonnet-4-6), else gorap's.
	CompactionAuto CompactionMode = ""
	// CompactionGorap always uses gorap's: the thread's own model
	// summarises its older history (compact.go).
	CompactionGorap CompactionMode = "gorap"
	// CompactionProvider uses only the provider's own compaction; New
	// fails when the model has none.
	CompactionProvider CompactionMode = "provider"
)

// setCompaction decides, once the window is known, whose compaction runs:
// r.serverCompactAt is the provider's trigger when it is the provider's,
// 0 otherwise. A provider compaction asked for (CompactionProvider) that
// the model does not have is an error that says why.
func (r *Runtime) setCompaction() error {
	c := r.cfg.Compaction
	switch c.Mode {
	case CompactionAuto, CompactionGorap, CompactionProvider:
	default:
		return fmt.Errorf("Compaction.Mode is %q: want %q (auto), %q or %q", c.Mode, CompactionAuto, CompactionGorap, CompactionProvider)
	}
	if c.Off || c.Mode == CompactionGorap {
		return nil
	}
	limit := r.compactLimit()
	least, err := model.ServerCompaction(r.model)
	if err == nil && limit < least {
		err = fmt.Errorf("its compaction starts at %d input tokens at least, and %.0f %% of the %d-token context window is %d: raise the window (rap serve --context-window) or Compaction.Share",
			least, r.compactShare()*100, r.compactWindow(), limit)
	}
	if err != nil {
		if c.Mode == CompactionProvider {
			return fmt.Errorf("compaction by the model's provider (rap serve --compaction provider, Compaction.Mode %q) is not available: %w; use --compaction auto or gorap, which summarise with the thread's own model", c.Mode, err)
		}
		return nil
	}
	r.serverCompactAt = limit
	return nil
}

// compactLimit is the estimated request size at which a thread is
// compacted: the share of the window.
func (r *Runtime) compactLimit() int {
	return int(float64(r.compactWindow()) * r.compactShare())
}

// logCompaction logs, at start, whose compaction keeps threads within the
// window.
func (r *Runtime) logCompaction() {
	switch {
	case r.cfg.Compaction.Off:
		r.log.Info("compaction off: every request carries the whole history")
	case r.serverCompactAt > 0:
		r.log.Info("compaction by the model's provider", "model", r.model.Name(), "trigger_input_tokens", r.serverCompactAt)
	default:
		r.log.Info("compaction by gorap", "model", r.model.Name(), "at_estimated_tokens", r.compactLimit())
	}
}

// CompactionInUse says whose compaction keeps the runtime's threads
// within the model's context window: "provider" (the model's API
// compacts, from atTokens input tokens on), "gorap" (gorap summarises
// with the model, from an estimated atTokens on) or "off".
func (r *Runtime) CompactionInUse() (who string, atTokens int) {
	switch {
	case r.cfg.Compaction.Off:
		return "off", 0
	case r.serverCompactAt > 0:
		return "provider", r.serverCompactAt
	}
	return "gorap", r.compactLimit()
}

// providerRequestFor is requestFor when the provider compacts: the request
// over what the model sees of history after the thread's latest
// compaction (providerView), carrying the provider's block and asking it
// to compact at the trigger.
func (r *Runtime) providerRequestFor(ctx context.Context, th store.Thread, history []store.Message, build func([]store.Message) model.Request) model.Request {
	comp, known := r.compacted.lookup(th.ID)
	if !known {
		// The first request of the thread in this process: its latest
		// compaction is read once, so that a restart sends the stored
		// block again.
		stored, err := r.storedCompaction(ctx, th)
		if err != nil {
			r.log.Warn("compaction: reading the thread's compaction failed; the request goes without it", "thread", th.ID, "err", err)
		} else {
			comp = stored
			r.compacted.set(th.ID, comp)
		}
	}
	req := r.providerRequest(th.ID, history, comp, build)
	limit := r.serverCompactAt
	if tokensAtMost(req) <= limit || estimateTokens(req) <= limit {
		return req
	}
	// Near the trigger: another process may have recorded a later
	// compaction of the thread meanwhile.
	if stored, err := r.storedCompaction(ctx, th); err == nil && stored != nil && (comp == nil || stored.UpToSeq > comp.UpToSeq) {
		r.compacted.set(th.ID, stored)
		req = r.providerRequest(th.ID, history, stored, build)
	}
	return req
}

func (r *Runtime) providerRequest(threadID string, history []store.Message, comp *store.Compaction, build func([]store.Message) model.Request) model.Request {
	r.hist.useView(threadID, viewBase(comp))
	req := build(providerView(history, comp))
	req.CompactAt = r.serverCompactAt
	if comp != nil && len(comp.Block) > 0 {
		req.Compaction = comp.Block
	}
	return req
}

// providerView is what the model sees of history under comp when the
// provider compacts: after a compaction of the provider's (one with a
// Block), only the messages after it, which follow the block the request
// carries; a result among them whose call came before the block is
// already a note (arrange.go), since the message right after the block is
// the assistant turn that came with it. After one of gorap's own, its
// summary (compactedView).
func providerView(history []store.Message, comp *store.Compaction) []store.Message {
	if comp == nil || len(comp.Block) == 0 {
		return compactedView(history, comp)
	}
	i := 0
	for i < len(history) && history[i].Seq <= comp.UpToSeq {
		i++
	}
	return history[i:]
}

// addServerCompaction records, in the transaction that saves its turn,
// the compaction the model's API made while it answered (nil: none): it
// covers every message up to the one before the turn, the last the
// request carried (the inputs are appended right before the turn). A
// thread's messages are numbered from 1 without gaps, its inherited ones
// included, so that is also how many it covers. It returns the
// compaction recorded, nil when none was.
func (r *Runtime) addServerCompaction(tx store.Tx, threadID string, block *model.CompactionBlock, appended []store.Message) (*store.Compaction, error) {
	if block == nil {
		return nil, nil
	}
	upto := turnSeq(appended) - 1
	if upto < 1 {
		return nil, nil
	}
	latest, err := tx.LatestCompaction(threadID)
	switch {
	case err == nil && latest.UpToSeq >= upto:
		r.log.Warn("compaction by the model's provider not recorded: the thread has one as far already", "thread", threadID, "up_to_seq", upto)
		return nil, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	c := store.Compaction{ThreadID: threadID, UpToSeq: upto, Summary: block.Summary, Messages: int(upto),
		Usage: r.storedUsage(block.Usage), Block: block.Raw, Created: time.Now().UTC()}
	if err := tx.AddCompaction(c); err != nil {
		return nil, err
	}
	return &c, nil
}

// serverCompacted makes the thread's next requests use c, a compaction
// by the model's provider just saved with its turn (nil: none), and tells
// the thread's clients.
func (r *Runtime) serverCompacted(threadID string, c *store.Compaction) {
	if c == nil {
		return
	}
	r.observeCompaction(CompactedByProvider, OutcomeOK)
	r.compacted.set(threadID, c)
	r.hist.useView(threadID, c.UpToSeq)
	r.log.Info("thread compacted by the model's provider", "thread", threadID, "messages", c.Messages, "up_to_seq", c.UpToSeq,
		"summary_bytes", len(c.Summary), "block_bytes", len(c.Block))
	r.emit(threadID, EventCompacted, apiCompaction(*c))
}
