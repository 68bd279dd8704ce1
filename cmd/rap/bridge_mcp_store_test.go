package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Standalone: "rap bridge mcp --data-dir DIR" keeps the
// bridge's subscriptions and callbacks in the durable store DIR/NAME.db,
// so that they survive a restart.
func TestBridgeMCPDataDir(t *testing.T) {
	mcpURL := newBridgeTestMCP(t)
	dir := filepath.Join(t.TempDir(), "state")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"bridge", "mcp", "--listen", "127.0.0.1:0", "--name", "echoer", "--data-dir", dir, "--url", mcpURL}, &out, &errOut)
	}()
	db := filepath.Join(dir, "echoer.db")
	waitFor(t, "the bridge to serve", func() bool { return strings.Contains(out.String(), "Add it to a runtime") })
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("no store: %v", err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("rap bridge mcp exited %d\n%s", code, errOut.String())
	}
}
