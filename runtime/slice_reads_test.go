package runtime

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// countingStore counts the slice loads (QuickView) the runtime makes.
type countingStore struct {
	store.Store
	loads *atomic.Int64
}

func (c countingStore) QuickView(ctx context.Context, fn func(store.Tx) error) error {
	c.loads.Add(1)
	return c.Store.QuickView(ctx, fn)
}

// A slice that consumed every row it loaded is not followed by another
// load that could only find the inbox empty (that read was
// one of the two each tool-call cycle made on the store's writer), and a
// message posted while a slice runs is still answered.
func TestDrainedSliceIsNotReloaded(t *testing.T) {
	var loads atomic.Int64
	e := newEnv(t, envOptions{
		turns:     []scripted.Turn{{Text: "echo: {{last_user}}", Repeat: true}},
		wrapStore: func(s store.Store) store.Store { return countingStore{Store: s, loads: &loads} },
	})
	thread := e.newThread()
	e.idle(thread)
	before := loads.Load()
	e.post(thread, "one")
	e.waitHistory(thread, "the answer to one", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "echo: one") })
	e.idle(thread)
	if n := loads.Load() - before; n != 1 {
		t.Errorf("one message answered in one slice made %d slice loads, want 1", n)
	}
	for _, m := range []string{"two", "three", "four"} {
		e.post(thread, m)
	}
	// Messages queued together are answered in one turn ("echo: three\n\nfour").
	e.waitHistory(thread, "an answer that includes four", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "four") })
}
