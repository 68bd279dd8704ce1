package mcp

import (
	"context"
	"fmt"
	"os"
)

const (
	// envBridgeHelper makes the test binary a process that runs a
	// bridge to a stdio server (this binary again) and waits.
	envBridgeHelper = "GORAP_MCP_TEST_BRIDGE_HELPER"
	// envLinger makes the stdio test server keep running after its
	// standard input closes.
	envLinger = "GORAP_MCP_TEST_LINGER"
)

// runBridgeHelper is the helper process of TestStdioServerDiesWithBridge.
func runBridgeHelper() {
	exe, err := os.Executable()
	if err != nil {
		os.Exit(2)
	}
	b, err := New(&Options{Name: "helper", Command: []string{exe, "-test.run=^$"}, Env: []string{envStdioServer + "=1", envLinger + "=1", envBridgeHelper + "="},
		Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := b.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	select {}
}
