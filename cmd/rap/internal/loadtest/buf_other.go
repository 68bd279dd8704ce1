//go:build !unix

package loadtest

import "time"

// durationBuffer returns an empty slice with room for n durations.
func durationBuffer(n int) (buf []time.Duration, release func()) {
	return make([]time.Duration, 0, n), func() {}
}
