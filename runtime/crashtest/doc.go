// Package crashtest holds the SIGKILL crash test of the gorap runtime. It
// has no API: its test builds the rap command, runs "rap serve" under a
// busy workload (many threads, user messages posted continuously, tool
// results arriving through callbacks), kills it with SIGKILL at random
// moments, restarts it on the same data directory, and checks that after
// every restart each accepted message appears exactly once in its thread's
// history, no turn is half-written, and every dispatched call gets exactly
// one result.
//
// The move crash tests (move_kill_test.go) kill the source or the
// destination runtime of a session's move at each of its steps, holding
// the step's request in a proxy between the two runtimes so that the kill
// lands where it is meant to, and check that the session ends in exactly
// one of them with every accepted message once in its history.
//
// Run it with:
//
//	go test ./runtime/crashtest -v
//
// and reproduce a failure with the seed it prints:
//
//	GORAP_CRASH_SEED=12345 go test ./runtime/crashtest -v
package crashtest
