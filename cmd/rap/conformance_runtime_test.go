package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/conformance"
	"github.com/gorap/gorap/model/scripted"
)

// freeAddr returns a loopback address with a port free a moment ago, for
// a server that must be named before it starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within 30s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeConformanceFiles writes the scripted model's script and the
// runtime configuration that loads the kit at kitURL, as the command
// prints them.
func writeConformanceFiles(t *testing.T, dir, kitURL string) (script, config string) {
	t.Helper()
	script, config = filepath.Join(dir, "conformance-script.json"), filepath.Join(dir, "conformance-rap.json")
	if err := os.WriteFile(script, conformance.RuntimeScript(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, conformance.RuntimeConfigFile(kitURL), 0o600); err != nil {
		t.Fatal(err)
	}
	return script, config
}

// gorap's runtime, run by rap serve with the scripted model, passes every
// runtime check through the command, the migration's included (to a
// second runtime); the timeout's is skipped, as it runs without one.
func TestConformanceRuntimeGorapConforms(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	kitAddr, srcAddr, dstAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	const token = "conformance-test-token-0123456789"
	junit := filepath.Join(dir, "runtime.xml")

	type outcome struct {
		code           int
		stdout, stderr string
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		code, out, errOut := runVerb(t, ctx, "conformance", "runtime", "--listen", kitAddr, "--runtime", "http://"+srcAddr,
			"--token", token, "--migrate-to", "http://"+dstAddr, "--migrate-token", token, "--json", "--junit", junit)
		done <- outcome{code, out, errOut}
	}()
	waitHTTP(t, "http://"+kitAddr+"/.well-known/rap-toolset")

	script, cfg := writeConformanceFiles(t, dir, "http://"+kitAddr)
	for _, addr := range []string{dstAddr, srcAddr} {
		s := baseSettings(t, "scripted:"+script, cfg)
		s.Listen, s.Token = addr, token
		_, _, _, stop := runningServe(t, s)
		defer stop()
	}

	var o outcome
	select {
	case o = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the conformance run did not end within 5 minutes")
	}
	if o.code != 0 {
		t.Errorf("exit status %d\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(o.stdout))
	for sc.Scan() {
		var res struct{ ID, Status, Message string }
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatalf("a --json line is not JSON: %q", sc.Text())
		}
		n++
		want := "pass"
		if res.ID == "runtime.timeout.result" {
			want = "skip"
		}
		if res.Status != want {
			t.Errorf("%s: %s (%s), want %s", res.ID, res.Status, res.Message, want)
		}
	}
	if want := len(conformance.RuntimeSuite(conformance.RuntimeConfig{}).Checks()); n != want {
		t.Errorf("%d JSON lines, want one a check (%d)", n, want)
	}
	if x, err := os.ReadFile(junit); err != nil || !strings.Contains(string(x), "runtime.callback.auth") {
		t.Errorf("the JUnit report was not written: %v", err)
	}
	if !strings.Contains(o.stderr, "The conformance toolset listens at http://"+kitAddr) {
		t.Errorf("stderr does not say where the toolset listens:\n%s", o.stderr)
	}
}

// With a tool timeout, gorap's runtime ends a silent call with an error
// result (RAP RT-5).
func TestConformanceRuntimeGorapTimeout(t *testing.T) {
	clearRAPEnv(t)
	kit, err := conformance.ListenRuntimeKit("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer kit.Close()
	script, cfg := writeConformanceFiles(t, t.TempDir(), kit.URL())
	s := baseSettings(t, "scripted:"+script, cfg)
	s.ToolTimeout = time.Second
	info, _, _, stop := runningServe(t, s)
	defer stop()
	rep := conformance.RuntimeSuite(conformance.RuntimeConfig{Kit: kit, API: info.URL}).Run(context.Background(),
		conformance.RunOptions{Only: []string{"runtime.timeout"}})
	if res, _ := rep.Result("runtime.timeout.result"); res.Status != conformance.Pass {
		t.Errorf("runtime.timeout.result: %s (%s)", res.Status, res.Message)
	}
}

func TestConformanceRuntimeUsage(t *testing.T) {
	ctx := context.Background()
	code, out, _ := runVerb(t, ctx, "conformance", "runtime", "--print-script")
	if code != 0 {
		t.Fatalf("--print-script: exit %d", code)
	}
	if _, err := scripted.Parse([]byte(out)); err != nil {
		t.Errorf("--print-script does not print a valid script: %v", err)
	}
	code, out, _ = runVerb(t, ctx, "conformance", "runtime", "--listen", "127.0.0.1:7070", "--print-config")
	if code != 0 || !strings.Contains(out, `"server_url": "http://127.0.0.1:7070"`) {
		t.Errorf("--print-config: exit %d, %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--runtime URL"},
		{[]string{"--runtime", "http://127.0.0.1:1", "--manual"}, "exclude each other"},
		{[]string{"--print-config"}, "fixed port"},
	} {
		code, _, errOut := runVerb(t, ctx, append([]string{"conformance", "runtime"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", c.args, code, errOut, exitUsage, c.want)
		}
	}
}
