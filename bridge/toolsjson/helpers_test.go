package toolsjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/raptest"
)

// writeBundle writes a signed bundle: tools.json, manifest.toml with its
// BLAKE3 digest, and policy.caps when policy is not empty.
func writeBundle(t *testing.T, toolsJSON, policy string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agents", "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, ToolsFile), toolsJSON, 0o644)
	mustWrite(t, filepath.Join(dir, ManifestFile), fmt.Sprintf("[artifacts.tools]\npath = \"tools.json\"\nblake3 = %q\nversion = 1\n", Digest([]byte(toolsJSON))), 0o644)
	if policy != "" {
		mustWrite(t, filepath.Join(dir, PolicyFile), policy, 0o644)
	}
	return dir
}

func mustWrite(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// writeScript writes an executable /bin/sh script and returns its path.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tool.sh")
	mustWrite(t, p, "#!/bin/sh\n"+body+"\n", 0o755)
	return p
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// served is a bundle served over real HTTP, with a fake runtime.
type served struct {
	srv   *Server
	url   string
	rt    *raptest.Runtime
	logs  *syncBuffer
	audit *syncBuffer
	// callbacks are every callback message received, as JSON.
	callbacks []string
}

func serveBundle(t *testing.T, dir string, opts Options) *served {
	t.Helper()
	b, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveLoaded(t, b, opts)
}

func serveLoaded(t *testing.T, b *Bundle, opts Options) *served {
	t.Helper()
	logs, audit := &syncBuffer{}, &syncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Audit = audit
	s, err := NewServer(b, &opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	rt := raptest.NewRuntime(raptest.WithLogger(opts.Logger))
	t.Cleanup(func() {
		rt.Close()
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
		_ = s.Close()
	})
	return &served{srv: s, url: hs.URL, rt: rt, logs: logs, audit: audit}
}

// invoke calls a tool and returns the text of its result.
func (s *served) invoke(t *testing.T, tool string, args any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call, err := s.rt.Invoke(ctx, s.url, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range call.Messages() {
		b, _ := json.Marshal(m)
		s.callbacks = append(s.callbacks, string(b))
	}
	return res.ModelText()
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustContain(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
}
