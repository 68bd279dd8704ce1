//go:build !unix

package main

import "time"

// processCPU reports that the CPU time of the process is not available.
func processCPU() (time.Duration, bool) { return 0, false }
