//go:build !linux

package mcp

import "os/exec"

// setDeathSignal does nothing: only Linux has a parent-death signal. A
// stdio MCP server still ends when its standard input closes.
func setDeathSignal(*exec.Cmd) {}
