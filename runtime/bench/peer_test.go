package bench

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/wiretest"
)

// peerEnv makes the test binary a bench peer (ServePeer) when set.
const peerEnv = "GORAP_BENCH_PEER_TEST"

func TestMain(m *testing.M) {
	if os.Getenv(peerEnv) != "" {
		script := func(req wiretest.Request) wiretest.Reply {
			n := 0
			for _, m := range req.Messages {
				n += len(m.ToolCalls)
			}
			if n >= 3 {
				return wiretest.Reply{Text: "done"}
			}
			return wiretest.Reply{ToolCalls: []model.ToolCall{{Name: "work", Arguments: json.RawMessage(`{}`)}}}
		}
		srv := wiretest.NewAnthropic(script)
		srv.ForgetRequests()
		err := ServePeer(context.Background(), PeerOptions{Budget: 3, Header: []string{"model " + srv.URL}}, os.Stdin, os.Stdout)
		srv.Close()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The tool server, the load generator and the model server run in a peer
// process: the cycle runs, threads that spend their budget are renewed
// through the peer's "renew" line, and the peer's CPU time is reported
// apart from this process's.
func TestRunCyclesWithPeer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), peerEnv+"=1")
	cmd.Stderr = os.Stderr
	peer, err := StartPeer(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if peer.ModelURL == "" {
		t.Fatal("the peer named no model server")
	}
	prov, err := anthropic.New(&anthropic.Options{APIKey: "k", BaseURL: peer.ModelURL})
	if err != nil {
		t.Fatal(err)
	}
	// 2 threads of 3 calls each: 12 cycles need renewed threads.
	rep, err := RunCycles(context.Background(), CycleOptions{Threads: 2, Cycles: 12, Budget: 3, Model: prov,
		Peer: peer, ExternalCPU: peer.CPU, Duration: 20 * time.Second, Warmup: 100 * time.Millisecond, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cycles < 12 || rep.Failures != 0 || !rep.RuntimeOnly {
		t.Errorf("want at least 12 cycles, no failures, runtime-only CPU; got:\n%s", rep)
	}
	if rep.P50 <= 0 || rep.Max < rep.P50 {
		t.Errorf("implausible latencies:\n%s", rep)
	}
	t.Logf("\n%s", rep)
}
