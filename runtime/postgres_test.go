package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// Runtime tests on the PostgreSQL store: the engine
// behaves on it as on SQLite. Each skips when GORAP_TEST_POSTGRES_URL is
// unset.

// TestPostgresToolRoundTrip: message → tool call → callback result →
// reply, on PostgreSQL, with the callback key kept in the store.
func TestPostgresToolRoundTrip(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{postgres: true, servers: []string{ts.URL()}, tweak: func(c *Config) { c.KeysFromStore = true }, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "It is {{last_result}}."},
	}})
	th := e.newThread()
	e.post(th, "what time is it?")
	inv := ts.next()
	reply(t, inv, "12:00 UTC")
	h := e.waitHistory(th, "the final answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "It is 12:00 UTC.") })
	if len(h) != 4 || h[2].ToolResults[0].CallID != inv.ID {
		t.Fatalf("history on PostgreSQL:\n%s", dump(h))
	}
	e.idle(th)
}

// TestPostgresRecoveryAfterRestart: a message queued while the runtime was
// down is answered at Start, on PostgreSQL (RAP RT-4).
func TestPostgresRecoveryAfterRestart(t *testing.T) {
	e := newEnv(t, envOptions{postgres: true, turns: []scripted.Turn{{Text: "back"}}})
	th := e.newThread()
	e.stop()
	e.offline(func(tx store.Tx) error {
		p, _ := json.Marshal(store.UserMessage{Text: "hello?"})
		_, err := tx.Enqueue(store.InboxItem{ThreadID: th, Kind: store.KindUserMessage, Payload: p, DedupKey: "user:crash"})
		return err
	})
	e.start()
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "back") })
}

// TestPostgresConcurrentMessagesExactlyOnce: under concurrent messages on
// PostgreSQL (serialization retries included) every message appears once,
// in order, and no thread's completions overlap (RAP RT-2).
func TestPostgresConcurrentMessagesExactlyOnce(t *testing.T) {
	g := &gate{inner: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), active: map[string]int{}}
	e := newEnv(t, envOptions{postgres: true, model: g})
	const threads, perThread = 3, 8
	ids := make([]string, threads)
	for i := range ids {
		ids[i] = e.newThread()
	}
	var wg sync.WaitGroup
	for i, th := range ids {
		wg.Go(func() {
			for j := range perThread {
				if err := e.rt.PostMessage(context.Background(), th, fmt.Sprintf("t%d-m%02d", i, j)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i, th := range ids {
		e.idle(th)
		var got []string
		for _, m := range e.history(th) {
			if m.Role == store.RoleUser {
				got = append(got, m.Text)
			}
		}
		if len(got) != perThread {
			t.Fatalf("thread %d has %d user messages, want %d: %v", i, len(got), perThread, got)
		}
		for j, text := range got {
			if want := fmt.Sprintf("t%d-m%02d", i, j); text != want {
				t.Fatalf("thread %d message %d = %q, want %q", i, j, text, want)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.overlap) > 0 {
		t.Fatalf("completions overlapped within a thread: %v", g.overlap)
	}
}

// newKeyRuntime returns a runtime (not started) on st whose callback keys
// come from the store.
func newKeyRuntime(t *testing.T, st store.Store, secret []byte) *Runtime {
	t.Helper()
	r, err := New(&Config{Store: st, Model: scripted.New(nil), PublicURL: "http://127.0.0.1:1", Secret: secret, KeysFromStore: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		r.Shutdown(ctx)
	})
	return r
}

// TestCallbackKeysShared: two runtimes on one
// PostgreSQL database accept each other's callback tokens; after one
// rotates the key, tokens signed with the old key stay valid in both
// during the grace and are refused after it, and tokens signed with the
// new key are accepted by the other as soon as it looks again.
func TestCallbackKeysShared(t *testing.T) {
	u := pgtest.URL(t)
	open := func() store.Store {
		s, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := newKeyRuntime(t, open(), nil)
	b := newKeyRuntime(t, open(), nil)
	old := a.callbackToken("th", "call-1")
	if th, c, err := b.verifyToken(old); err != nil || th != "th" || c != "call-1" {
		t.Fatalf("runtime B refused runtime A's token: %q %q %v", th, c, err)
	}
	const grace = 3 * time.Second
	// The grace ends grace after a moment inside RotateCallbackKey: between
	// these two readings, however slow the store is under load.
	before := time.Now()
	if err := a.RotateCallbackKey(context.Background(), grace); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	fresh := a.callbackToken("th", "call-2")
	poll(t, "runtime B to accept a token signed with the rotated key", func() bool {
		_, _, err := b.verifyToken(fresh)
		return err == nil
	})
	for name, r := range map[string]*Runtime{"A": a, "B": b} {
		if _, _, err := r.verifyToken(old); err != nil && time.Since(before) < grace {
			t.Errorf("runtime %s refused a token of the previous key during the grace: %v", name, err)
		}
	}
	poll(t, "the previous key's grace to end", func() bool { return time.Since(rotated) > grace+100*time.Millisecond })
	for name, r := range map[string]*Runtime{"A": a, "B": b} {
		if _, _, err := r.verifyToken(old); err == nil {
			t.Errorf("runtime %s accepted a token of the previous key after its grace", name)
		}
		if _, _, err := r.verifyToken(fresh); err != nil {
			t.Errorf("runtime %s refused a token of the current key: %v", name, err)
		}
	}
}

// TestCallbackKeyUpgradeKeepsFileKey: on SQLite, a
// runtime that takes its keys from the store keeps the key of the data
// dir's callback.key file, so callback URLs handed out before the upgrade
// keep working, and it keeps the stored key on later starts.
func TestCallbackKeyUpgradeKeepsFileKey(t *testing.T) {
	e := newEnv(t, envOptions{})
	before := e.rt.callbackToken("th", "call-1")
	secret := e.cfg.Secret
	e.stop()
	e.cfg.KeysFromStore = true
	e.start()
	if _, _, err := e.rt.verifyToken(before); err != nil {
		t.Fatalf("after the upgrade a callback URL from before is refused: %v", err)
	}
	var stored store.CallbackKeys
	e.offlineView(func(tx store.Tx) error {
		var err error
		stored, err = tx.CallbackKeys()
		return err
	})
	if string(stored.Current) != string(secret) {
		t.Errorf("the store's callback key is not the file's")
	}
	// A later start with another proposal keeps the stored key.
	e.stop()
	e.cfg.Secret = []byte("another-key-that-must-not-win-0123")
	e.start()
	if _, _, err := e.rt.verifyToken(before); err != nil {
		t.Fatalf("a second start changed the callback key: %v", err)
	}
}

// offlineView reads the store while the runtime is running, through the
// runtime's own store.
func (e *env) offlineView(fn func(store.Tx) error) {
	e.t.Helper()
	if err := e.rt.store.View(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
}

// consumeFirst is a model that, on its first completion, consumes the
// thread's queued inputs directly in the store, as another process
// sharing the store would after answering them, then answers.
type consumeFirst struct {
	model.Provider
	st     func() store.Store
	thread string
	once   sync.Once
	err    error
}

func (c *consumeFirst) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	c.once.Do(func() {
		c.err = c.st().Update(ctx, func(tx store.Tx) error {
			q, err := tx.Queued(c.thread)
			if err != nil {
				return err
			}
			ids := make([]int64, len(q))
			for i, it := range q {
				ids[i] = it.ID
			}
			if _, err := tx.AppendMessages(c.thread, []store.Message{{Role: store.RoleAssistant, Text: "answered elsewhere"}}); err != nil {
				return err
			}
			return tx.Consume(ids)
		})
	})
	return c.Provider.Complete(ctx, req, s)
}

// TestSliceAbandonedWhenInputsConsumedElsewhere: when a
// slice's inputs were consumed by another slice while its completion ran,
// its commit fails with store.ErrConsumed and the engine drops its turn:
// the input is answered once, no error is reported, and the thread goes
// on with its next message.
func TestSliceAbandonedWhenInputsConsumedElsewhere(t *testing.T) {
	m := &consumeFirst{Provider: scripted.New([]scripted.Turn{{Text: "answered here", Repeat: true}})}
	var e *env
	m.st = func() store.Store { return e.rt.store }
	e = newEnv(t, envOptions{model: m})
	th := e.newThread()
	m.thread = th
	e.post(th, "hello")
	e.idle(th)
	if m.err != nil {
		t.Fatalf("consuming the inputs from the model: %v", m.err)
	}
	h := e.history(th)
	if hasText(h, store.RoleAssistant, "answered here") || !hasText(h, store.RoleAssistant, "answered elsewhere") {
		t.Fatalf("history after the inputs were consumed elsewhere (want only the other answer):\n%s", dump(h))
	}
	if n := len(e.logs.records("slice failed")); n > 0 {
		t.Errorf("the abandoned slice was logged as failed %d times", n)
	}
	e.post(th, "again")
	e.waitHistory(th, "the next message's answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "answered here") })
	if errors.Is(e.rt.Idle(context.Background(), th), ErrSliceFailed) {
		t.Error("Idle reports a failed slice")
	}
}
