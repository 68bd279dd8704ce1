package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// Several runtimes on one PostgreSQL database, as several `rap serve`
// processes would be.

// TestSharedStoreNoDoubleProcessing (no double processing, in one test
// process): 3 runtimes on one database, 20
// threads, messages sent to any runtime; one fake model records every
// completion. No two completions of one thread overlap in time, every
// message is in its thread's history once, and each batch of inputs is
// answered once (never two answers in a row).
func TestSharedStoreNoDoubleProcessing(t *testing.T) {
	u := pgtest.URL(t)
	g := &gate{inner: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), active: map[string]int{},
		hold: func(string) { time.Sleep(2 * time.Millisecond) }} // widens any overlap
	const runtimes, threads, perThread = 3, 20, 3
	envs := make([]*env, runtimes)
	for i := range envs {
		envs[i] = newEnv(t, envOptions{pgURL: u, model: g, tweak: func(c *Config) { c.SweepEvery = 200 * time.Millisecond }})
	}
	ids := make([]string, threads)
	for i := range ids {
		ids[i] = envs[i%runtimes].newThread()
	}
	var wg sync.WaitGroup
	for i, th := range ids {
		wg.Go(func() {
			for j := range perThread {
				e := envs[rand.IntN(runtimes)]
				if err := e.rt.PostMessage(context.Background(), th, fmt.Sprintf("t%02d-m%d", i, j)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i, th := range ids {
		h := envs[0].waitHistory(th, fmt.Sprintf("thread %d answered", i), func(h []store.Message) bool {
			users := 0
			for _, m := range h {
				if m.Role == store.RoleUser {
					users++
				}
			}
			return users >= perThread && h[len(h)-1].Role == store.RoleAssistant
		})
		seen := map[string]int{}
		for k, m := range h {
			if m.Role == store.RoleUser {
				seen[m.Text]++
			}
			if k > 0 && m.Role == store.RoleAssistant && h[k-1].Role == store.RoleAssistant {
				t.Errorf("thread %d: two answers in a row (an input answered twice):\n%s", i, dump(h))
			}
		}
		for j := range perThread {
			if text := fmt.Sprintf("t%02d-m%d", i, j); seen[text] != 1 {
				t.Errorf("thread %d: message %q appears %d times, want once:\n%s", i, text, seen[text], dump(h))
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.overlap) > 0 {
		t.Fatalf("completions of one thread overlapped across runtimes: %v", g.overlap)
	}
	for i, e := range envs {
		t.Logf("runtime %d ran %d completions", i, len(e.model.requests()))
	}
}

// TestSharedStoreLeaseFailover: a thread whose lease is
// held by a process that died (a lease nobody renews) is taken by another
// runtime once the lease expired, and its queued message answered.
func TestSharedStoreLeaseFailover(t *testing.T) {
	u := pgtest.URL(t)
	e := newEnv(t, envOptions{pgURL: u, turns: []scripted.Turn{{Text: "taken over", Repeat: true}},
		tweak: func(c *Config) { c.SweepEvery = 100 * time.Millisecond }})
	th := e.newThread()
	const lease = 2 * time.Second
	died := time.Now()
	if err := e.rt.store.Update(context.Background(), func(tx store.Tx) error {
		ok, err := leases(tx).ClaimThread(th, "dead-process", died, died.Add(lease))
		if err == nil && !ok {
			err = fmt.Errorf("the dead process's claim failed")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.post(th, "anyone there?")
	e.waitHistory(th, "the answer after the lease expired", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "taken over") })
	if since := time.Since(died); since < lease {
		t.Errorf("the thread was answered %v after the dead process claimed it, before its %v lease expired", since, lease)
	}
	// Once idle, the runtime hands the thread back.
	poll(t, "the lease to be handed back", func() bool {
		var err error
		e.rt.store.View(context.Background(), func(tx store.Tx) error { _, _, err = leases(tx).ThreadLease(th); return nil })
		return err != nil
	})
}

// TestSharedStoreTimerFiresOnce: a due sleep timer on a
// database shared by 3 runtimes wakes its thread once.
func TestSharedStoreTimerFiresOnce(t *testing.T) {
	u := pgtest.URL(t)
	envs := make([]*env, 3)
	for i := range envs {
		envs[i] = newEnv(t, envOptions{pgURL: u, turns: []scripted.Turn{{Text: "woke", Repeat: true}},
			tweak: func(c *Config) { c.SweepEvery = 50 * time.Millisecond }})
	}
	th := envs[0].newThread()
	// A pending sleep call and its due timer, as a process that then died
	// would have left them.
	payload, _ := json.Marshal(sleepPayload{CallID: "sleep-1", Text: "slept"})
	if err := envs[0].rt.store.Update(context.Background(), func(tx store.Tx) error {
		if _, err := tx.AppendMessages(th, []store.Message{{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "sleep-1", Name: "sleep", Arguments: json.RawMessage(`{}`)}}}}); err != nil {
			return err
		}
		if err := tx.PutCalls([]store.Call{{ThreadID: th, CallID: "sleep-1", ToolName: "sleep", Toolset: builtinToolset, State: store.CallDispatched, TurnSeq: 1}}); err != nil {
			return err
		}
		return tx.PutTimer(store.Timer{ID: sleepTimerID(th, "sleep-1"), ThreadID: th, Kind: timerSleep, Payload: payload, Due: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	envs[0].waitHistory(th, "the thread woken by its timer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "woke") })
	for _, e := range envs {
		e.idle(th)
	}
	h := envs[0].history(th)
	n := 0
	for _, r := range results(h) {
		if r.CallID == "sleep-1" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the sleep's result is in the history %d times, want once:\n%s", n, dump(h))
	}
}

// TestSharedStoreRedispatchesOrphanedCall (recovery runs
// continuously): a call saved long ago but never dispatched (its process
// died in between) is dispatched by a running runtime's sweep, by one of
// two runtimes only.
func TestSharedStoreRedispatchesOrphanedCall(t *testing.T) {
	u := pgtest.URL(t)
	ts := newToolServer(t, "clock", tool("get_time"))
	envs := make([]*env, 2)
	for i := range envs {
		envs[i] = newEnv(t, envOptions{pgURL: u, servers: []string{ts.URL()}, turns: []scripted.Turn{{Text: "It is {{last_result}}.", Repeat: true}},
			tweak: func(c *Config) { c.SweepEvery = 20 * time.Millisecond }})
	}
	th := envs[0].newThread()
	if err := envs[0].rt.store.Update(context.Background(), func(tx store.Tx) error {
		if _, err := tx.AppendMessages(th, []store.Message{{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "orphan", Name: "get_time", Arguments: json.RawMessage(`{}`)}}}}); err != nil {
			return err
		}
		return tx.PutCalls([]store.Call{{ThreadID: th, CallID: "orphan", ToolName: "get_time", Arguments: json.RawMessage(`{}`),
			Toolset: "clock", Endpoint: ts.URL() + "/invoke", TurnSeq: 1, State: store.CallNew, Created: time.Now().Add(-time.Hour)}})
	}); err != nil {
		t.Fatal(err)
	}
	inv := ts.next()
	if inv.ID != "orphan" {
		t.Fatalf("dispatched %q, want the orphaned call", inv.ID)
	}
	reply(t, inv, "noon")
	envs[1].waitHistory(th, "the answer to the orphaned call", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "It is noon.") })
	if n := len(envs[0].logs.records("dispatching a call its process left undispatched")) + len(envs[1].logs.records("dispatching a call its process left undispatched")); n != 1 {
		t.Errorf("the orphaned call was dispatched by %d runtimes, want 1", n)
	}
}

// blockUntilCancelled is a model whose completions wait for their context
// to end; started is signalled at each.
type blockUntilCancelled struct {
	started chan struct{}
}

func (b *blockUntilCancelled) Name() string         { return "block" }
func (b *blockUntilCancelled) SupportsImages() bool { return false }
func (b *blockUntilCancelled) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestSharedStoreShutdownHandsThreadsBack (graceful
// shutdown hands claimed threads back): a runtime shut down in the middle
// of a slice releases the thread's lease at once, and another runtime on
// the same database answers the message without waiting for the lease to
// expire.
func TestSharedStoreShutdownHandsThreadsBack(t *testing.T) {
	u := pgtest.URL(t)
	blocker := &blockUntilCancelled{started: make(chan struct{}, 1)}
	a := newEnv(t, envOptions{pgURL: u, model: blocker, tweak: func(c *Config) { c.LeaseTTL = time.Hour }})
	th := a.newThread()
	a.post(th, "hello")
	select {
	case <-blocker.started:
	case <-time.After(waitFor):
		t.Fatal("the slice never called the model")
	}
	a.stop()
	b := newEnv(t, envOptions{pgURL: u, turns: []scripted.Turn{{Text: "answered by B", Repeat: true}}, tweak: func(c *Config) { c.LeaseTTL = time.Hour }})
	b.waitHistory(th, "runtime B's answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "answered by B") })
}

// leases returns the lease methods of a transaction of a PostgreSQL store.
func leases(tx store.Tx) store.Leases { return tx.(store.Leases) }
