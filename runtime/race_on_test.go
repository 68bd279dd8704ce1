//go:build race

package runtime

// raceEnabled is true in a -race build, whose slowdown the soak test allows for.
const raceEnabled = true
