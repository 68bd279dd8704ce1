package runtime

// This file owns token usage per thread.

import (
	"sync"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/api"
)

// Token usage. Every completion's usage, as the provider
// reported it, is published as a "usage" event and added to the thread's
// totals, which GET /v1/threads/{id} shows under "usage". The totals are
// kept in memory: they count the completions since the runtime started.

// usageEvent is the payload of EventUsage.
type usageEvent = api.Usage

func newUsageEvent(u model.Usage) usageEvent {
	return usageEvent{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		UncachedInputTokens: u.UncachedInputTokens(), CacheWriteInputTokens: u.CacheWriteInputTokens,
		OutputTokens: u.OutputTokens}
}

// usageTotals sums the usage of each thread's completions.
type usageTotals struct {
	mu sync.Mutex
	by map[string]*model.Usage
}

func (t *usageTotals) add(threadID string, u model.Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]*model.Usage{}
	}
	s := t.by[threadID]
	if s == nil {
		s = &model.Usage{}
		t.by[threadID] = s
	}
	s.InputTokens += u.InputTokens
	s.CachedInputTokens += u.CachedInputTokens
	s.CacheWriteInputTokens += u.CacheWriteInputTokens
	s.OutputTokens += u.OutputTokens
}

func (t *usageTotals) get(threadID string) *usageEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.by[threadID]; s != nil {
		e := newUsageEvent(*s)
		return &e
	}
	return nil
}

// recordUsage publishes a completion's usage and adds it to the thread's
// totals; a provider that reports none (the scripted model) adds nothing.
func (r *Runtime) recordUsage(threadID string, u model.Usage) {
	if u == (model.Usage{}) {
		return
	}
	r.usage.add(threadID, u)
	r.emit(threadID, EventUsage, newUsageEvent(u))
}
