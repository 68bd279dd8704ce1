//go:build !unix

package cpustat

import "time"

// Process reports false: this platform's CPU time is not read.
func Process() (time.Duration, bool) { return 0, false }
