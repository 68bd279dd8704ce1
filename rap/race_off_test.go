//go:build !race

package rap_test

// raceEnabled is true in a -race build, whose memory is several times a
// normal build's: memory bounds are checked without it.
const raceEnabled = false
