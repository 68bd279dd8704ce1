//go:build !unix

package toolsetcmd

import "os/exec"

// setProcessGroup does nothing where process groups are not available.
func setProcessGroup(*exec.Cmd) {}

// signalGroup stops the program itself (there is no SIGTERM here, so
// both requests kill it).
func signalGroup(cmd *exec.Cmd, _ bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
