package runtime

// This file owns compaction: keeping a thread that lives for months within
// its model's context window. When the request a slice is about to send
// would pass a share of the window (Config.Compaction), the older part of
// the thread's history is summarised by the model and, from then on, the
// model sees the summary instead of those messages. The store keeps every
// message; a compaction is one row (store.Compactions), written in one
// transaction, so a crash leaves the thread either with the summary or
// without it, never half of it.
//
// Never summarised away: a tool call whose result was not among the
// summarised messages (the model keeps seeing it, and its result or
// placeholder, after the summary), the inputs the slice is about to add,
// and the last Config.Compaction.KeepLast messages. A child
// thread sees its parent's compaction when the summary covers only what it
// inherited.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// CompactionConfig sets when and how threads are compacted.
type CompactionConfig struct {
	// Off turns compaction off: every request carries the whole history.
	Off bool
	// Mode chooses whose compaction runs: the provider's own where the
	// model has one, else gorap's (CompactionAuto, the zero value);
	// always gorap's; or only the provider's (compact_provider.go).
	Mode CompactionMode
	// Share is the share of the context window a request may fill before
	// the thread is compacted; zero means DefaultCompactionShare.
	Share float64
	// KeepLast is how many of the latest messages are never summarised;
	// zero means DefaultCompactionKeepLast.
	KeepLast int
	// Window is the context window compaction keeps requests within, in
	// tokens; zero takes the runtime's (Config.ContextWindow, else the
	// model's, else model.DefaultContextWindow).
	Window int
}

// Compaction defaults.
const (
	// DefaultCompactionShare is near the reference runtime's 75 %.
	DefaultCompactionShare = 0.75
	// DefaultCompactionKeepLast keeps the last few turns whole.
	DefaultCompactionKeepLast = 6
)

// compactWindow returns the context window compaction works against:
// Config.Compaction.Window, else the runtime's (bounds.go).
func (r *Runtime) compactWindow() int {
	if w := r.cfg.Compaction.Window; w > 0 {
		return w
	}
	return r.window
}

func (r *Runtime) compactShare() float64 {
	if s := r.cfg.Compaction.Share; s > 0 && s < 1 {
		return s
	}
	return DefaultCompactionShare
}

func (r *Runtime) compactKeepLast() int {
	if n := r.cfg.Compaction.KeepLast; n > 0 {
		return n
	}
	return DefaultCompactionKeepLast
}

// estimateTokens estimates a request's input tokens (model.EstimateTokens
// over its texts), the tools' schemas included.
func estimateTokens(req model.Request) int {
	n := model.EstimateTokens(req.System) + model.EstimateTokens(string(req.Compaction))
	for _, t := range req.Tools {
		n += model.EstimateTokens(t.Name) + model.EstimateTokens(t.Description) + model.EstimateTokens(string(t.InputSchema))
	}
	for _, m := range req.Messages {
		n += 4 // the message's framing
		n += model.EstimateTokens(m.Text)
		for _, c := range m.ToolCalls {
			n += model.EstimateTokens(c.Name) + model.EstimateTokens(string(c.Arguments)) + 4
		}
		for _, res := range m.ToolResults {
			n += model.EstimateTokens(res.Text) + 4
			for _, c := range res.Content {
				n += model.EstimateTokens(c.Text)
				if c.Type == "image" {
					n += imageTokens
				}
			}
		}
	}
	return n
}

// tokensAtMost bounds estimateTokens(req) from above by counting bytes
// only: the estimate never gives a byte more than a token and a half. A
// request this bound puts under the limit needs no estimate: the common
// case costs a sum of lengths.
func tokensAtMost(req model.Request) int {
	n := len(req.System) + len(req.Compaction)
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	extra := 0
	for _, m := range req.Messages {
		extra += 4
		n += len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
			extra += 4
		}
		for _, res := range m.ToolResults {
			n += len(res.Text)
			extra += 4
			for _, c := range res.Content {
				n += len(c.Text)
				if c.Type == "image" {
					extra += imageTokens
				}
			}
		}
	}
	return n + n/2 + 1 + extra
}

// imageTokens is about what one image of a tool result costs.
const imageTokens = 1600

// compactions remembers, per thread, the compaction its requests use, so
// that a slice reads the store for it only when the request is near the
// window.
type compactions struct {
	mu sync.Mutex
	by map[string]*store.Compaction
}

func (c *compactions) get(thread string) *store.Compaction {
	comp, _ := c.lookup(thread)
	return comp
}

// lookup returns the thread's compaction and whether it is known: a
// thread set to nil has none.
func (c *compactions) lookup(thread string) (*store.Compaction, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	comp, ok := c.by[thread]
	return comp, ok
}

func (c *compactions) set(thread string, comp *store.Compaction) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil || len(c.by) >= maxRememberedUsers {
		c.by = map[string]*store.Compaction{}
	}
	c.by[thread] = comp
}

// compactedView returns what the model sees of history under comp: the
// summary, as a user message numbered as the last message it covers; then
// the tool calls among the covered messages whose results are not among
// them (still waiting, or arrived later), as an assistant message of their
// own, so that each keeps its place and its result; then the messages
// after the summary. Without comp, history itself. The view depends only
// on history and comp, so the requests over it keep their prefix.
func compactedView(history []store.Message, comp *store.Compaction) []store.Message {
	if comp == nil {
		return history
	}
	i := 0
	for i < len(history) && history[i].Seq <= comp.UpToSeq {
		i++
	}
	if i == 0 {
		return history
	}
	answered := map[string]bool{}
	for _, m := range history[:i] {
		for _, res := range m.ToolResults {
			answered[res.CallID] = true
		}
	}
	var open []store.ToolCall
	for _, m := range history[:i] {
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				open = append(open, c)
			}
		}
	}
	view := make([]store.Message, 0, len(history)-i+2)
	thread := history[i-1].ThreadID
	view = append(view, store.Message{ThreadID: thread, Seq: comp.UpToSeq, Role: store.RoleUser, Created: comp.Created,
		Text: fmt.Sprintf("%s%d earlier messages of this conversation are summarised here:]\n\n%s", summaryPrefix, comp.Messages, comp.Summary)})
	if len(open) > 0 {
		view = append(view, store.Message{ThreadID: thread, Seq: comp.UpToSeq, Role: store.RoleAssistant, Created: comp.Created, ToolCalls: open})
	}
	return append(view, history[i:]...)
}

// summaryPrefix begins the message that carries a summary.
const summaryPrefix = "[Summary: "

// requestFor returns the next request of thread th over history, built by
// build from what the model sees of it (compactedView), compacting the thread
// first when that request would pass the share of the window. It never
// fails the slice: a compaction that fails is logged, and the request goes
// as it was.
func (r *Runtime) requestFor(ctx context.Context, th store.Thread, history []store.Message, build func([]store.Message) model.Request) model.Request {
	if r.serverCompactAt > 0 {
		return r.providerRequestFor(ctx, th, history, build)
	}
	comp := r.compacted.get(th.ID)
	r.hist.useView(th.ID, viewBase(comp))
	req := build(compactedView(history, comp))
	if r.cfg.Compaction.Off {
		return req
	}
	limit := r.compactLimit()
	if tokensAtMost(req) <= limit || estimateTokens(req) <= limit || r.countedUnder(ctx, th.ID, req, limit) {
		return req
	}
	// Near the window: another process (or an earlier run) may have
	// compacted the thread, or it compacts now.
	stored, err := r.storedCompaction(ctx, th)
	if err != nil {
		r.log.Warn("compaction: reading the thread's compaction failed; the request goes as it is", "thread", th.ID, "err", err)
		return req
	}
	if stored != nil && (comp == nil || stored.UpToSeq > comp.UpToSeq) {
		comp = stored
		r.compacted.set(th.ID, comp)
		r.hist.useView(th.ID, viewBase(comp))
		if req = build(compactedView(history, comp)); estimateTokens(req) <= limit {
			return req
		}
	}
	// What stays whole is about half of what the messages may fill, so
	// that the next compaction is far off.
	overhead := estimateTokens(model.Request{System: req.System, Tools: req.Tools})
	next, err := r.compact(ctx, th, history, comp, max(limit-overhead, 0)/2, false)
	if err != nil {
		r.log.Warn("compaction failed; the request goes as it is", "thread", th.ID, "err", err)
		return req
	}
	if next == nil {
		return req
	}
	r.hist.useView(th.ID, viewBase(next))
	return build(compactedView(history, next))
}

// countTimeout bounds a request to the provider's token count.
const countTimeout = 10 * time.Second

// countedUnder reports whether the model's provider, asked to count req's
// tokens exactly (model.TokenCounter), says it is within limit although
// the estimate said it was not: then the thread need not compact yet. A
// provider that cannot count, or a count that fails, leaves the estimate's
// answer.
func (r *Runtime) countedUnder(ctx context.Context, threadID string, req model.Request, limit int) bool {
	c, ok := r.cfg.Model.(model.TokenCounter)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	n, err := c.CountTokens(ctx, req)
	if err != nil {
		r.log.Warn("compaction: the model's provider could not count the request's tokens; going by the estimate", "thread", threadID, "err", r.redact(err.Error()))
		return false
	}
	r.log.Debug("compaction: the provider counted the request", "thread", threadID, "tokens", n, "estimate", estimateTokens(req), "limit", limit)
	return n <= limit
}

func viewBase(c *store.Compaction) int64 {
	if c == nil {
		return 0
	}
	return c.UpToSeq
}

// storedCompaction reads the latest compaction the thread's view can use:
// its own, or, for a child, the nearest ancestor's that covers only what
// the child inherited.
func (r *Runtime) storedCompaction(ctx context.Context, th store.Thread) (*store.Compaction, error) {
	var out *store.Compaction
	err := r.store.View(ctx, func(tx store.Tx) error {
		out = nil
		c, err := tx.LatestCompaction(th.ID)
		if err == nil {
			out = &c
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		limit, cur := th.InheritSeq, th
		for cur.ParentID != "" && limit > 0 {
			parent, err := tx.Thread(cur.ParentID)
			if err != nil {
				return err
			}
			all, err := tx.ThreadCompactions(parent.ID)
			if err != nil {
				return err
			}
			for i := len(all) - 1; i >= 0; i-- {
				if all[i].UpToSeq <= limit {
					c := all[i]
					out = &c
					return nil
				}
			}
			limit, cur = min(limit, parent.InheritSeq), parent
		}
		return nil
	})
	return out, err
}

// compactCut returns how many of the view's messages a compaction may
// cover: all but the latest ones that fit in keepTokens, and never the last
// keep (tool calls among the covered ones still waiting for their results
// stay in the view: compactedView). Zero when fewer than two would be covered.
func compactCut(view []store.Message, keep, keepTokens int) int {
	cut, tokens := len(view), 0
	for cut > 0 {
		n := messageTokens(view[cut-1])
		if len(view)-cut >= keep && tokens+n > keepTokens {
			break
		}
		tokens += n
		cut--
	}
	if cut < 2 {
		return 0
	}
	return cut
}

// messageTokens estimates a stored message's tokens as estimateTokens
// does a request's (a result's text whole: as stored, not as bounded).
func messageTokens(m store.Message) int {
	n := 4 + model.EstimateTokens(m.Text)
	for _, c := range m.ToolCalls {
		n += model.EstimateTokens(c.Name) + model.EstimateTokens(string(c.Arguments)) + 4
	}
	for _, res := range m.ToolResults {
		n += model.EstimateTokens(res.Text) + 4
		for _, c := range res.Content {
			n += model.EstimateTokens(c.Text)
			if c.Type == "image" {
				n += imageTokens
			}
		}
	}
	return n
}

// compactInstructions tell the model how to summarise.
const compactInstructions = `You are summarising the earlier part of a long conversation between a user and an AI agent that uses tools, so that the agent can go on without it. Write a summary that the agent will read instead of those messages. Keep:
- the user's goals and requests, and what is still open;
- decisions made and why; facts learnt, with the exact names, ids, numbers, paths and URLs that may be needed again;
- commitments the agent made and has not kept yet;
- tool calls still waiting for a result and subscriptions still active, by tool name and call id;
- the user's stated preferences.
Leave out pleasantries and anything settled that will not matter again. Write plain text, in the conversation's language, as short as it can be while keeping all of that.`

// compactRequestText is the last message of a summarising request.
const compactRequestText = "Summarize the conversation above for the agent, as the instructions say. Answer with the summary only."

// compact summarises history's older part (as the model sees it under
// prev) with the model, keeping whole the latest messages that fit in
// keepTokens (and at least the last KeepLast), and records the compaction.
// force says it was asked for, not needed. It returns nil when there is
// nothing to summarise.
func (r *Runtime) compact(ctx context.Context, th store.Thread, history []store.Message, prev *store.Compaction, keepTokens int, force bool) (*store.Compaction, error) {
	view := compactedView(history, prev)
	cut := compactCut(view, r.compactKeepLast(), keepTokens)
	if cut < 2 {
		return nil, nil
	}
	upto := view[cut-1].Seq
	if prev != nil && upto <= prev.UpToSeq {
		return nil, nil
	}
	covered := 0
	for _, m := range history {
		if m.Seq <= upto {
			covered++
		}
	}
	msgs, _ := arrangeFrom(joined{head: view[:cut]}, modelView{images: r.model.SupportsImages(), maxResultTokens: r.maxResultTokens}, nil, nil)
	msgs = append(msgs, model.Message{Role: model.RoleUser, Text: compactRequestText})
	maxTokens := min(max(r.compactWindow()/8, 512), 8192)
	req := model.Request{System: compactInstructions, Messages: msgs, MaxTokens: maxTokens}
	ctx, cancel := context.WithTimeout(ctx, r.modelTimeout())
	defer cancel()
	start := time.Now()
	r.log.Info("compacting thread", "thread", th.ID, "messages", covered, "up_to_seq", upto, "forced", force)
	resp, err := r.model.Complete(ctx, req, discardStream{})
	if r.metrics != nil {
		var u model.Usage
		if err == nil {
			u = resp.Usage
		}
		r.observeCompletion(PurposeCompaction, start, u, err)
	}
	if err != nil {
		r.observeCompaction(CompactedByGorap, OutcomeError)
		return nil, fmt.Errorf("%w: it did not write the summary: %w", api.ErrModelFailed, err)
	}
	summary := strings.TrimSpace(resp.Text)
	if summary == "" {
		r.observeCompaction(CompactedByGorap, OutcomeError)
		return nil, fmt.Errorf("%w: it wrote an empty summary", api.ErrModelFailed)
	}
	c := store.Compaction{ThreadID: th.ID, UpToSeq: upto, Summary: summary, Messages: covered, Usage: r.storedUsage(resp.Usage), Created: time.Now().UTC()}
	err = r.store.Update(ctx, func(tx store.Tx) error {
		if latest, err := tx.LatestCompaction(th.ID); err == nil && latest.UpToSeq >= upto {
			c = latest // another process compacted as far meanwhile
			return nil
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.AddCompaction(c)
	})
	if err != nil {
		r.observeCompaction(CompactedByGorap, OutcomeError)
		return nil, fmt.Errorf("record the compaction: %w", err)
	}
	r.observeCompaction(CompactedByGorap, OutcomeOK)
	r.compacted.set(th.ID, &c)
	r.log.Info("thread compacted", "thread", th.ID, "messages", covered, "up_to_seq", upto, "summary_bytes", len(c.Summary),
		"took", time.Since(start).Round(time.Millisecond), "forced", force)
	r.emit(th.ID, EventCompacted, apiCompaction(c))
	return &c, nil
}

// discardStream drops a completion's deltas: a summary is not shown as
// it is written.
type discardStream struct{}

func (discardStream) TextDelta(string) {}

// useView makes the thread's cached arrangement and encoding of its
// history belong to the view over the compaction up to base (0: none):
// when the view changes, what was cached of the previous one is dropped.
func (c *historyCache) useView(thread string, base int64) {
	if c == nil || c.max < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[thread]
	if !ok {
		return
	}
	e := el.Value.(*historyEntry)
	if e.viewBase != base {
		e.arr, e.wire, e.viewBase = nil, nil, base
	}
}

// compactNow compacts the thread whatever its estimated size, keeping
// whole only the last KeepLast messages, and reports whether it did. When
// the provider compacts (compact_provider.go) gorap's compaction does not
// run: it reports false.
func (r *Runtime) compactNow(ctx context.Context, th store.Thread, history []store.Message) bool {
	if r.serverCompactAt > 0 {
		return false
	}
	prev := r.compacted.get(th.ID)
	if stored, err := r.storedCompaction(ctx, th); err == nil && stored != nil && (prev == nil || stored.UpToSeq > prev.UpToSeq) {
		prev = stored
	}
	c, err := r.compact(ctx, th, history, prev, 0, true)
	if err != nil {
		r.log.Warn("compaction after the provider found the prompt too long failed", "thread", th.ID, "err", err)
		return false
	}
	if c == nil {
		return false
	}
	r.hist.useView(th.ID, c.UpToSeq)
	return true
}
