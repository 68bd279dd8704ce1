package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// flakyLLM is a local server speaking the Anthropic wire format that
// answers 529 (overloaded) while it has failures left, then answers each
// user message.
type flakyLLM struct {
	mu        sync.Mutex
	failsLeft int // -1: fail until told otherwise
	failed    int
	answered  []string // the user text of each successful answer
	srv       *wiretest.Server
}

func newFlakyLLM(t *testing.T) *flakyLLM {
	f := &flakyLLM{failsLeft: -1}
	f.srv = wiretest.NewAnthropic(func(req wiretest.Request) wiretest.Reply {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.failsLeft != 0 {
			if f.failsLeft > 0 {
				f.failsLeft--
			}
			f.failed++
			// Retry-After-Ms keeps the SDK's own retries quick.
			return wiretest.Reply{Status: 529, Error: "overloaded", Header: http.Header{"Retry-After-Ms": {"1"}}}
		}
		last := req.Messages[len(req.Messages)-1].Text
		f.answered = append(f.answered, last)
		return wiretest.Reply{Text: "answer to " + last}
	})
	t.Cleanup(f.srv.Close)
	return f
}

func (f *flakyLLM) state() (failed int, answered []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed, append([]string(nil), f.answered...)
}

// SIGKILL the runtime while a model call is failing and
// its retry timer is pending, restart it on the same data directory while
// the model still fails once more: the completion is retried on its own
// (no new user message), answered exactly once, and the message is in the
// history exactly once, with no timer or inbox row left behind.
func TestSIGKILLWhileModelCallRetries(t *testing.T) {
	dir := t.TempDir()
	bin := buildRap(t, dir)
	llm := newFlakyLLM(t)
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(`{"tool_sets": []}`), 0o644)
	dataDir := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "serve.log")
	env := []string{"ANTHROPIC_BASE_URL=" + llm.srv.URL, "ANTHROPIC_API_KEY=sk-ant-crash-test-0123456789",
		"RAP_MODEL=", "RAP_MODEL_RETRY_BACKOFF=1500ms", "RAP_MODEL_ATTEMPTS=5"}
	const modelSpec = "anthropic:test-model"

	proc, base := startServeWith(t, bin, "127.0.0.1:0", dataDir, cfg, modelSpec, env, logPath)
	listen := strings.TrimPrefix(base, "http://")
	defer func() {
		proc.kill()
		if t.Failed() {
			t.Logf("rap serve log (tail):\n%s", tail(logPath))
		}
	}()

	ctx := context.Background()
	c := apiClient(t, base)
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		t.Fatalf("create thread: %v", err)
	}
	if _, err := c.PostMessage(ctx, th.ID, "hello"); err != nil {
		t.Fatalf("post message: %v", err)
	}

	// The first completion fails and the runtime schedules its retry
	// (it logs the failure once the timer is saved).
	waitUntil(t, 30*time.Second, "the first failure and its scheduled retry", func() bool {
		return strings.Contains(tail(logPath), "slice failed") // logged once the retry timer is saved
	})
	proc.kill()
	failedBefore, answered := llm.state()
	if len(answered) != 0 {
		t.Fatalf("the model answered before the kill: %v", answered)
	}

	// After the restart the model fails once more (the SDK tries each
	// completion up to 3 times), then answers.
	llm.mu.Lock()
	llm.failsLeft = 3
	llm.mu.Unlock()
	proc, _ = startServeWith(t, bin, listen, dataDir, cfg, modelSpec, env, logPath)
	var history []api.Message
	waitUntil(t, 60*time.Second, "the answer after the restart", func() bool {
		info, err := c.Thread(ctx, th.ID)
		if err != nil || info.Queued != 0 {
			return false
		}
		history, err = c.History(ctx, th.ID)
		return err == nil && len(history) > 0
	})
	proc.stop(t)

	failed, answered := llm.state()
	t.Logf("%d failed model requests before the kill, %d in all; answers: %v", failedBefore, failed, answered)
	if len(answered) != 1 || answered[0] != "hello" {
		t.Fatalf("the model answered %v; want exactly one answer, to \"hello\"", answered)
	}
	if failed < failedBefore+3 {
		t.Fatalf("%d model requests failed after the restart; want the restart's first completion to fail, so the answer comes from the durable retry", failed-failedBefore)
	}
	if len(history) != 2 || history[0].Text != "hello" || history[1].Text != "answer to hello" {
		t.Fatalf("history = %+v; want the message once, then the answer once", history)
	}
	// Nothing is left that could run the model again.
	dbPath := filepath.Join(dataDir, "runtime.db") // cmd/rap's store file
	if _, err := os.Stat(dbPath); err != nil {
		t.Fatalf("the store is not where expected: %v", err)
	}
	st, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.View(context.Background(), func(tx store.Tx) error {
		if _, ok, err := tx.NextTimer(); err != nil || ok {
			return fmt.Errorf("a timer is left (%v)", err)
		}
		if q, err := tx.Queued(th.ID); err != nil || len(q) != 0 {
			return fmt.Errorf("%d inbox rows are left (%v)", len(q), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
