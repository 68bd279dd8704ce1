package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// Environment of the helper process of the SIGKILL tests.
const (
	killDirEnv   = "GORAP_KILL_HELPER_DIR"
	killAddrEnv  = "GORAP_KILL_HELPER_ADDR"
	killModeEnv  = "GORAP_KILL_HELPER_MODE"
	killToolsEnv = "GORAP_KILL_HELPER_TOOLS"
)

// TestKillHelper is not a test: it is the runtime process that the SIGKILL
// tests start and kill. It does nothing unless started by them.
func TestKillHelper(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		return
	}
	st, err := sqlite.Open(filepath.Join(dir, "rap.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	secret, err := LoadOrCreateSecret(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var m model.Provider
	switch os.Getenv(killModeEnv) {
	case "sleep":
		m = scripted.New([]scripted.Turn{
			{AfterUser: "nap", Text: "sleeping", ToolCalls: []scripted.Call{{Name: BuiltinSleep, Arguments: json.RawMessage(`{"seconds": 2}`)}}},
			{When: &scripted.When{LastResultContains: "Woke up"}, Text: "rested"},
			{Text: "?", Repeat: true},
		})
	default:
		m = &fnModel{fn: eventAgent(func(string) (string, any) { return "watch", map[string]any{} })}
	}
	addr := os.Getenv(killAddrEnv)
	var servers []string
	if s := os.Getenv(killToolsEnv); s != "" {
		servers = []string{s}
	}
	rt, err := New(&Config{Store: st, Model: m, PublicURL: "http://" + addr, Secret: secret, ToolServers: servers,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		DispatchRetry: RetryPolicy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Attempts: 50}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := rt.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	http.Serve(ln, rt.Handler())
	os.Exit(0)
}

// killable runs the runtime in a child process on a fixed address.
type killable struct {
	t    *testing.T
	dir  string
	addr string
	mode string
	tool string
	cmd  *exec.Cmd
}

func newKillable(t *testing.T, mode, toolURL string) *killable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	k := &killable{t: t, dir: t.TempDir(), addr: addr, mode: mode, tool: toolURL}
	t.Cleanup(func() { k.kill() })
	return k
}

func (k *killable) url() string { return "http://" + k.addr }

func (k *killable) start() {
	k.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), killDirEnv+"="+k.dir, killAddrEnv+"="+k.addr, killModeEnv+"="+k.mode, killToolsEnv+"="+k.tool)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.cmd = cmd
	poll(k.t, "the runtime process to listen", func() bool {
		resp, err := http.Get(k.url() + "/v1/threads")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// kill sends SIGKILL: no shutdown, no flush.
func (k *killable) kill() {
	if k.cmd == nil {
		return
	}
	k.cmd.Process.Signal(syscall.SIGKILL)
	k.cmd.Wait()
	k.cmd = nil
}

func (k *killable) getJSON(path string, v any) error {
	resp, err := http.Get(k.url() + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (k *killable) history(thread string) []store.Message {
	k.t.Helper()
	var body struct{ Messages []store.Message }
	if err := k.getJSON("/v1/threads/"+thread+"/messages", &body); err != nil {
		k.t.Fatal(err)
	}
	return body.Messages
}

func (k *killable) newThread() string {
	k.t.Helper()
	status, body := callback(k.t, k.url()+"/v1/threads", "{}")
	var out struct{ ID string }
	if json.Unmarshal([]byte(body), &out); status != http.StatusCreated || out.ID == "" {
		k.t.Fatalf("create thread: %d %s", status, body)
	}
	return out.ID
}

func (k *killable) waitHistory(thread, what string, cond func([]store.Message) bool) []store.Message {
	k.t.Helper()
	var h []store.Message
	poll(k.t, what, func() bool {
		h = k.history(thread)
		return cond(h)
	})
	return h
}

// RAP BT-1: a runtime killed with SIGKILL during a sleep wakes the thread
// exactly once after it restarts.
func TestKillDuringSleep(t *testing.T) {
	k := newKillable(t, "sleep", "")
	k.start()
	th := k.newThread()
	if status, body := callback(t, k.url()+"/v1/threads/"+th+"/messages", `{"text":"nap"}`); status != http.StatusAccepted {
		t.Fatalf("%d %s", status, body)
	}
	poll(t, "the sleep to be pending", func() bool {
		var info struct {
			PendingCalls []store.Call `json:"pending_calls"`
		}
		return k.getJSON("/v1/threads/"+th, &info) == nil && len(info.PendingCalls) == 1 && info.PendingCalls[0].ToolName == BuiltinSleep
	})
	k.kill()
	k.start()
	k.waitHistory(th, "the wake-up", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "rested") })
	k.kill()
	k.start()
	time.Sleep(300 * time.Millisecond)
	h := k.history(th)
	if countResults(h, "Woke up") != 1 || countAssistant(h, "rested") != 1 {
		t.Fatalf("the sleep woke the thread %d times, want once:\n%s", countResults(h, "Woke up"), dump(h))
	}
}

// RAP SU-6, RE-6: a runtime killed with SIGKILL during a burst of
// subscription events loses none and handles none twice: the tool keeps
// resending each event (with its Idempotency-Key) until it is answered 200.
func TestKillDuringEventBurst(t *testing.T) {
	ts := newToolServer(t, "feed", tool("watch"))
	k := newKillable(t, "events", ts.URL())
	k.start()
	th := k.newThread()
	if status, body := callback(t, k.url()+"/v1/threads/"+th+"/messages", `{"text":"subscribe"}`); status != http.StatusAccepted {
		t.Fatalf("%d %s", status, body)
	}
	inv := ts.next()
	if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "subscribed", Subscription: true}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	k.waitHistory(th, "the confirmation", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "waiting for events") })

	const n = 120
	type event struct {
		key  string
		body rap.SubscriptionEvent
	}
	events := make([]event, n)
	for i := range events {
		events[i] = event{key: uuid.NewString(), body: rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID,
			Text: fmt.Sprintf(`{"raw":"EV-%d"}`, i), Associative: i%3 == 0}}
	}
	// send delivers one event as a RAP sender would: retry until 200.
	send := func(ev event) {
		b, _ := json.Marshal(ev.body)
		deadline := time.Now().Add(2 * waitFor)
		for time.Now().Before(deadline) {
			req, _ := http.NewRequest(http.MethodPost, inv.CallbackURL, strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(rap.IdempotencyKeyHeader, ev.key)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("event %s was never accepted", ev.body.Text)
	}
	var wg sync.WaitGroup
	next := make(chan event)
	for range 8 {
		wg.Go(func() {
			for ev := range next {
				send(ev)
			}
		})
	}
	restarted := make(chan struct{})
	for i, ev := range events {
		if i == n/2 {
			k.kill() // mid-burst; senders retry while it is down
			go func() {
				defer close(restarted)
				k.start()
			}()
		}
		next <- ev
	}
	close(next)
	wg.Wait()
	<-restarted
	k.waitHistory(th, "every event handled", func(h []store.Message) bool {
		_, res := injected(h)
		return len(res) >= n
	})
	time.Sleep(300 * time.Millisecond)
	h := k.history(th)
	_, res := injected(h)
	inline := map[string]int{}
	reports := 0
	for _, r := range res {
		if strings.Contains(r.Text, "handled one event") {
			reports++
		} else {
			inline[r.Text]++
		}
	}
	var threads struct{ Threads []store.Thread }
	if err := k.getJSON("/v1/threads", &threads); err != nil {
		t.Fatal(err)
	}
	own := map[string]int{}
	for _, c := range threads.Threads {
		if c.ParentID != th {
			continue
		}
		_, kres := injected(k.history(c.ID))
		own[kres[len(kres)-1].Text]++
	}
	for i, ev := range events {
		want := 1
		got := own[ev.body.Text]
		if ev.body.Associative {
			got = inline[ev.body.Text]
		}
		if got != want {
			t.Fatalf("event %d (associative %v) handled %d times, want once", i, ev.body.Associative, got)
		}
	}
	if reports != len(own) {
		t.Fatalf("%d reports for %d child threads", reports, len(own))
	}
}
