package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apitypes "github.com/gorap/gorap/runtime/api"
	rapclient "github.com/gorap/gorap/runtime/client"
)

// compactScript declares a small window and answers slowly enough (its
// summary streams word by word) that a process can be killed while it
// writes one.
const compactScript = `{"context_window": 6000, "stream_delay": "100ms", "turns": [
  {"when": {"user_contains": "Summarize the conversation above"}, "text": "SUMMARY: the user sent numbered notes, one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen.", "repeat": true},
  {"text": "ok", "repeat": true}
]}`

// startInfoServe runs rap serve as startServeWith does, logging at info
// level (the compaction's lines).
func startInfoServe(t *testing.T, bin, listen, dataDir, cfg, script, logPath string) (*serveProcess, string) {
	t.Helper()
	wrapper := filepath.Join(filepath.Dir(bin), "rap-info.sh")
	body := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\" --log-level info\n", bin)
	if err := os.WriteFile(wrapper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return startServeWith(t, wrapper, listen, dataDir, cfg, "scripted:"+script, nil, logPath)
}

// RAP RT-4 for compaction: a SIGKILL while the summary is being written,
// and one right after it was recorded, leave the thread consistent: after
// a restart it has at most one compaction per point it covers, every
// accepted message exactly once, and it answers the next message.
func TestSIGKILLDuringCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rap and runs it")
	}
	dir := t.TempDir()
	bin := buildRap(t, dir)
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(compactScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "rap.json")
	if err := os.WriteFile(cfg, []byte(`{"tool_sets": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, point := range []string{"compacting thread", "thread compacted"} {
		t.Run("killed at "+point, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			logPath := filepath.Join(t.TempDir(), "serve.log")
			listen := freeAddr(t)
			p, base := startInfoServe(t, bin, listen, data, cfg, script, logPath)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c := apiClient(t, base)
			th, err := c.CreateThread(ctx, apitypes.CreateThreadRequest{})
			if err != nil {
				t.Fatal(err)
			}
			padding := strings.Repeat("x", 600)
			var sent []string
			send := func(c *rapclient.Client, i int) {
				text := fmt.Sprintf("note %03d %s", i, padding)
				if _, err := c.PostMessage(ctx, th.ID, text); err != nil {
					t.Fatalf("post note %d: %v", i, err)
				}
				sent = append(sent, text)
			}
			// Send notes until the point shows in the log, and kill the
			// process the moment it does: while the summary streams, or
			// right after it was recorded, before the answer.
			i := 0
			for killed := false; !killed; i++ {
				if i > 200 {
					t.Fatalf("no compaction after 200 notes:\n%s", tail(logPath))
				}
				send(c, i)
				deadline := time.Now().Add(60 * time.Second)
				for !killed {
					if b, _ := os.ReadFile(logPath); strings.Contains(string(b), point) {
						p.kill()
						killed = true
						break
					}
					if answers(ctx, c, th.ID) >= len(sent) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("note %d was not answered:\n%s", i, tail(logPath))
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			i--
			p, base = startInfoServe(t, bin, listen, data, cfg, script, logPath)
			defer p.stop(t)
			c = apiClient(t, base)
			send(c, i+1)
			waitAnswered(t, ctx, c, th.ID, len(sent))
			msgs, err := c.History(ctx, th.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range sent {
				n := 0
				for _, m := range msgs {
					if m.Role == apitypes.RoleUser && m.Text == text {
						n++
					}
				}
				if n != 1 {
					t.Errorf("note %q… appears %d times; want once", text[:8], n)
				}
			}
			comps := historyCompactions(t, base, th.ID)
			seen := map[int64]bool{}
			for _, cp := range comps {
				if seen[cp.UpToSeq] || !strings.HasPrefix(cp.Summary, "SUMMARY:") {
					t.Errorf("compaction %+v is doubled or half-written", cp)
				}
				seen[cp.UpToSeq] = true
			}
			if point == "thread compacted" && len(comps) == 0 {
				t.Errorf("the compaction recorded before the kill is gone after the restart")
			}
			t.Logf("killed at %q after %d notes; %d compactions after the restart", point, i, len(comps))
		})
	}
}

// answers counts the thread's answers; -1 when the history cannot be read.
func answers(ctx context.Context, c *rapclient.Client, thread string) int {
	msgs, err := c.History(ctx, thread)
	if err != nil {
		return -1
	}
	n := 0
	for _, m := range msgs {
		if m.Role == apitypes.RoleAssistant && m.Text == "ok" {
			n++
		}
	}
	return n
}

// waitAnswered waits until the thread's history has n answers.
func waitAnswered(t *testing.T, ctx context.Context, c *rapclient.Client, thread string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := answers(ctx, c, thread)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages answered", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// historyCompactions reads the compactions GET history lists.
func historyCompactions(t *testing.T, base, thread string) []apitypes.Compaction {
	t.Helper()
	resp, err := client.Get(base + "/v1/threads/" + thread + "/messages")
	if err != nil {
		t.Fatalf("GET history: %v", err)
	}
	defer resp.Body.Close()
	var h apitypes.HistoryResponse
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h.Compactions
}

// freeAddr returns a loopback address with a port free now, for a
// process that restarts on the same port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
