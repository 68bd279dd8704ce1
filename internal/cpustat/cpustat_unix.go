//go:build unix

package cpustat

import (
	"syscall"
	"time"
)

// Process returns the CPU time (user and system) the process has used,
// and false where the platform does not report it.
func Process() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
