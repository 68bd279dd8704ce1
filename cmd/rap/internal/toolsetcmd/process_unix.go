//go:build unix

package toolsetcmd

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs the program in a process group of its own, so that
// stopping it also stops the processes it started, and (on Linux) has it
// killed when rap serve dies.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends SIGTERM (or SIGKILL when kill is set) to the program's
// process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	if cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
