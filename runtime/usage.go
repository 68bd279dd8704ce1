package runtime

// This file owns token usage: every completion's usage, as its provider
// reported it, is saved with the assistant message of its turn (so the
// totals survive restarts and moves), published as a "usage" event, and
// summed per thread and per session by GET /v1/threads/{id}.

import (
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// usageEvent is the payload of EventUsage.
type usageEvent = api.Usage

func newUsageEvent(u model.Usage) usageEvent {
	return usageEvent{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		UncachedInputTokens: u.UncachedInputTokens(), CacheWriteInputTokens: u.CacheWriteInputTokens,
		OutputTokens: u.OutputTokens}
}

// recordUsage publishes a completion's usage; a provider that reports
// none (the scripted model) publishes nothing.
func (r *Runtime) recordUsage(threadID string, u model.Usage) {
	if u == (model.Usage{}) {
		return
	}
	r.emit(threadID, EventUsage, newUsageEvent(u))
}

// storedUsage is a completion's usage as saved with its turn; nil when
// the provider reported none.
func (r *Runtime) storedUsage(u model.Usage) *store.Usage {
	if u == (model.Usage{}) {
		return nil
	}
	return &store.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		CacheWriteInputTokens: u.CacheWriteInputTokens, OutputTokens: u.OutputTokens, Model: r.model.Name()}
}

// apiUsage is a sum of usage for the client API; nil when it is zero.
func apiUsage(u store.Usage) *api.Usage {
	u.Model = ""
	if u == (store.Usage{}) {
		return nil
	}
	return &api.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		UncachedInputTokens: u.InputTokens - u.CachedInputTokens, CacheWriteInputTokens: u.CacheWriteInputTokens,
		OutputTokens: u.OutputTokens}
}

// threadUsage sums the saved usage of the thread's own turns.
func threadUsage(tx store.Tx, threadID string) (*api.Usage, error) {
	u, err := tx.ThreadUsage(threadID)
	if err != nil {
		return nil, err
	}
	return apiUsage(u), nil
}
