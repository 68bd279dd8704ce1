//go:build unix

package toolsjson

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the tool in its own process group and makes
// cancellation kill the whole group, children included.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
