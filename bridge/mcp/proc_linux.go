//go:build linux

package mcp

import (
	"os/exec"
	"syscall"
)

// setDeathSignal asks Linux to SIGKILL a stdio MCP server when the
// bridge's process dies, even by SIGKILL: a server that
// does not exit when its standard input closes is not left running. The
// signal follows the OS thread that started the server; Go keeps its
// threads for the life of the process unless a goroutine locked to one
// exits, which the bridge does not do.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
