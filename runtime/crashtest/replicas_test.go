package crashtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
	apitypes "github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// completion is one request the fake model served.
type completion struct {
	thread     int
	inputs     []int // the message numbers sent since the last answer
	start, end time.Time
}

// recordingLLM is a local Anthropic-compatible model server that records
// every completion with the thread it belongs to (read from the message
// texts "tNNN-mK") and when it started and ended, holding each a little
// so that two overlapping completions of a thread would show.
type recordingLLM struct {
	mu    sync.Mutex
	calls []completion
	srv   *wiretest.Server
}

var inputRE = regexp.MustCompile(`t(\d{3})-m(\d+)`)

func newRecordingLLM(t *testing.T, hold time.Duration) *recordingLLM {
	l := &recordingLLM{}
	l.srv = wiretest.NewAnthropic(func(req wiretest.Request) wiretest.Reply {
		c := completion{thread: -1, start: time.Now()}
		since := 0 // the messages after the last answer are the new inputs
		for i, m := range req.Messages {
			if m.Role == model.RoleAssistant {
				since = i + 1
			}
		}
		for i, m := range req.Messages {
			for _, g := range inputRE.FindAllStringSubmatch(m.Text, -1) {
				th, _ := strconv.Atoi(g[1])
				k, _ := strconv.Atoi(g[2])
				c.thread = th
				if i >= since {
					c.inputs = append(c.inputs, k)
				}
			}
		}
		time.Sleep(hold)
		c.end = time.Now()
		l.mu.Lock()
		l.calls = append(l.calls, c)
		l.mu.Unlock()
		return wiretest.Reply{Text: fmt.Sprintf("answer %d", len(c.inputs))}
	})
	t.Cleanup(l.srv.Close)
	return l
}

// freePorts returns a port p such that p, p+1, … p+n-1 were free.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := first.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{first}
		ok := true
		for k := 1; k < n; k++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+k))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatalf("found no %d consecutive free ports", n)
	return 0
}

// replicasScript is examples/replicas/run.sh, relative to this package.
const replicasScript = "../../examples/replicas/run.sh"

// TestReplicasNoDoubleProcessing (no double processing, and the tested
// replicas example): examples/replicas/run.sh starts 3 real
// `rap serve` processes on one PostgreSQL database; 100 threads get two
// messages each, posted round-robin to the three (the second to another
// process than the first). A fake model server records every completion:
// no two completions of one thread overlap in time, each message reaches
// the model as a new input exactly once, and each history holds both
// messages once, answered. Then SIGTERM stops the replicas gracefully.
func TestReplicasNoDoubleProcessing(t *testing.T) {
	storeURL := pgtest.URL(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run examples/replicas/run.sh")
	}
	const replicas, threads = 3, 100
	dir := t.TempDir()
	bin := buildRap(t, dir)
	llm := newRecordingLLM(t, 15*time.Millisecond)
	cfg := filepath.Join(dir, "rap.json")
	os.WriteFile(cfg, []byte(`{"tool_sets": []}`), 0o644)
	port := freePorts(t, replicas)
	dataRoot := filepath.Join(dir, "replicas")
	cmd := exec.Command("sh", replicasScript, "--model", "anthropic:test-model", "--config", cfg, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "RAP_TOKEN=", "RAP_PUBLIC_URL=", "RAP_TOOL_TOKEN=", "RAP_MODEL=", "RAP_STORE="+storeURL,
		"N="+strconv.Itoa(replicas), "BASE_PORT="+strconv.Itoa(port), "DATA_ROOT="+dataRoot, "RAP_BIN="+bin,
		"ANTHROPIC_BASE_URL="+llm.srv.URL, "ANTHROPIC_API_KEY=sk-ant-replicas-test-0123456789")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the script's process group: the replicas too
			<-exited
		}
		if t.Failed() {
			for k := range replicas {
				t.Logf("replica %d log (tail):\n%s", k, tail(filepath.Join(dataRoot, fmt.Sprintf("replica-%d", k), "serve.log")))
			}
		}
	}()
	bases := make([]string, replicas)
	for k := range bases {
		bases[k] = fmt.Sprintf("http://127.0.0.1:%d", port+k)
		waitUntil(t, 60*time.Second, "replica "+strconv.Itoa(k)+" ready (/readyz)", func() bool {
			resp, err := client.Get(bases[k] + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}

	ctx := context.Background()
	ids := make([]string, threads)
	var wg sync.WaitGroup
	jobs := make(chan int)
	start := time.Now()
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range jobs {
				c := apiClient(t, bases[i%replicas])
				th, err := c.CreateThread(ctx, apitypes.CreateThreadRequest{})
				if err != nil {
					t.Errorf("create thread %d: %v", i, err)
					continue
				}
				ids[i] = th.ID
				for k := range 2 {
					c := apiClient(t, bases[(i+k)%replicas])
					if _, err := c.PostMessage(ctx, th.ID, fmt.Sprintf("t%03d-m%d", i, k)); err != nil {
						t.Errorf("post message %d of thread %d to replica %d: %v", k, i, (i+k)%replicas, err)
					}
				}
			}
		})
	}
	for i := range threads {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if t.Failed() {
		return
	}
	histories := make([][]apitypes.Message, threads)
	for i, id := range ids {
		c := apiClient(t, bases[(i+2)%replicas])
		waitUntil(t, 60*time.Second, fmt.Sprintf("thread %d answered", i), func() bool {
			h, err := c.History(ctx, id)
			if err != nil || len(h) == 0 || h[len(h)-1].Role != apitypes.RoleAssistant {
				return false
			}
			users := 0
			for _, m := range h {
				if m.Role == apitypes.RoleUser {
					users++
				}
			}
			histories[i] = h
			return users == 2
		})
	}
	t.Logf("%d threads, %d messages answered by %d replicas in %v", threads, 2*threads, replicas, time.Since(start).Round(time.Millisecond))

	llm.mu.Lock()
	calls := append([]completion(nil), llm.calls...)
	llm.mu.Unlock()
	byThread := map[int][]completion{}
	for _, c := range calls {
		byThread[c.thread] = append(byThread[c.thread], c)
	}
	for i := range threads {
		cs := byThread[i]
		sort.Slice(cs, func(a, b int) bool { return cs[a].start.Before(cs[b].start) })
		for k := 1; k < len(cs); k++ {
			if cs[k].start.Before(cs[k-1].end) {
				t.Errorf("thread %d: two completions overlap: %v–%v and %v–%v", i,
					cs[k-1].start.Format("15:04:05.000"), cs[k-1].end.Format("15:04:05.000"), cs[k].start.Format("15:04:05.000"), cs[k].end.Format("15:04:05.000"))
			}
		}
		seen := map[int]int{}
		for _, c := range cs {
			for _, k := range c.inputs {
				seen[k]++
			}
		}
		for k := range 2 {
			if seen[k] != 1 {
				t.Errorf("thread %d: message %d reached the model as a new input %d times, want once", i, k, seen[k])
			}
		}
		texts := map[string]int{}
		h := histories[i]
		for j, m := range h {
			if m.Role == apitypes.RoleUser {
				texts[m.Text]++
			}
			if j > 0 && m.Role == apitypes.RoleAssistant && h[j-1].Role == apitypes.RoleAssistant {
				t.Errorf("thread %d: two answers in a row: %+v", i, h)
			}
		}
		for k := range 2 {
			if text := fmt.Sprintf("t%03d-m%d", i, k); texts[text] != 1 {
				t.Errorf("thread %d: %q is in the history %d times, want once", i, text, texts[text])
			}
		}
	}
	if n := len(byThread[-1]); n > 0 {
		t.Errorf("%d completions belong to no thread of the test", n)
	}

	// Graceful stop: SIGTERM to the script stops every replica.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("run.sh after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("the replicas did not stop within 60s of SIGTERM")
	}
}
