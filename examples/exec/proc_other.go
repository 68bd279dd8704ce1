//go:build !unix

package exec

import osexec "os/exec"

// setProcessGroup is a no-op where process groups are not available:
// cancellation kills the program but not its children.
func setProcessGroup(cmd *osexec.Cmd) {}

// killGroup does nothing where process groups are not available.
func killGroup(cmd *osexec.Cmd) {}
