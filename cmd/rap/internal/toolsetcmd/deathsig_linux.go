//go:build linux

package toolsetcmd

import "syscall"

// setDeathSignal asks Linux to SIGKILL the program when "rap serve" dies,
// even by SIGKILL, which leaves no chance to stop it.
// The signal follows the OS thread that started the program; Go keeps
// its threads for the life of the process unless a goroutine locked to
// one exits, which rap serve does not do.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
