//go:build unix && !linux

package toolsetcmd

import "syscall"

// setDeathSignal does nothing: only Linux has a parent-death signal. The
// process group still lets rap serve stop what it started when it exits
// normally.
func setDeathSignal(*syscall.SysProcAttr) {}
