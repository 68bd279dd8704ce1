//go:build !unix

package toolsjson

import "os/exec"

// setProcessGroup kills only the tool process itself where process
// groups do not exist.
func setProcessGroup(cmd *exec.Cmd) {}
